package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"reflect"

	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// CallerAuthorizer decides whether a caller of kas's public API or HTTP listener may reach an agent.
type CallerAuthorizer interface {
	// AuthenticateCaller checks the caller's bearer token: an Unauthenticated status when nobody has it.
	AuthenticateCaller(ctx context.Context, token string) (Caller, error)
}

// Caller is an authenticated caller.
type Caller interface {
	// MayReach reports whether the caller may call agentID.
	MayReach(agentID int64) bool
}

// StaticCallerTokens is the default CallerAuthorizer: a fixed set of tokens, each allowed to reach some
// agents, or all of them.
type StaticCallerTokens struct {
	byHash map[[sha256.Size]byte]*staticCaller
}

type staticCaller struct {
	token  string
	all    bool
	agents map[int64]bool
}

func (c *staticCaller) MayReach(id int64) bool { return c.all || c.agents[id] }

// NewStaticCallerTokens builds the authorizer from token -> agent ids; a nil list means every agent.
func NewStaticCallerTokens(tokens map[string][]int64) (*StaticCallerTokens, error) {
	s := &StaticCallerTokens{byHash: make(map[[sha256.Size]byte]*staticCaller, len(tokens))}
	for tok, ids := range tokens {
		if tok == "" {
			return nil, fmt.Errorf("a caller token is empty")
		}
		c := &staticCaller{token: tok, all: ids == nil, agents: map[int64]bool{}}
		for _, id := range ids {
			c.agents[id] = true
		}
		s.byHash[sha256.Sum256([]byte(tok))] = c
	}
	return s, nil
}

var errInvalidCallerToken = status.Error(codes.Unauthenticated, "invalid caller token")

// AuthenticateCaller implements CallerAuthorizer. Tokens are compared in constant time.
func (s *StaticCallerTokens) AuthenticateCaller(_ context.Context, token string) (Caller, error) {
	c, ok := s.byHash[sha256.Sum256([]byte(token))]
	if !ok || subtle.ConstantTimeCompare([]byte(c.token), []byte(token)) != 1 {
		return nil, errInvalidCallerToken
	}
	return c, nil
}

// PermissionError is the status for a caller that may not reach an agent.
func PermissionError(agentID int64) error {
	return status.Errorf(codes.PermissionDenied, "this caller token may not reach agent %d", agentID)
}

// CallerAuthInterceptor guards a routing server: the caller's bearer token must be known
// (Unauthenticated otherwise) and allowed to reach the agent the call is for (PermissionDenied
// otherwise). The token never travels further: kas strips authorization before any other hop. Refused
// callers go to refusals (nil: not logged).
func CallerAuthInterceptor(a CallerAuthorizer, refusals *refusal.Log) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		token, err := BearerToken(ctx)
		if err != nil {
			refusals.Refused("caller", "no caller token", refusal.Peer(ctx), "method", info.FullMethod, "err", err)
			return err
		}
		caller, err := a.AuthenticateCaller(ctx, token)
		if err != nil {
			refusals.Refused("caller", "invalid caller token", refusal.Peer(ctx), "method", info.FullMethod)
			return err
		}
		md, _ := metadata.FromIncomingContext(ctx)
		agentID, err := call.AgentIDFromMetadata(md)
		if err != nil {
			return err
		}
		if !caller.MayReach(agentID) {
			refusals.Refused("caller", "agent not allowed for the caller token", refusal.Peer(ctx), "agent_id", agentID, "method", info.FullMethod)
			return PermissionError(agentID)
		}
		return handler(srv, &callerStream{ServerStream: ss, ctx: WithCaller(ctx, caller)})
	}
}

// callerStream is a stream whose context knows its caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }

type callerKey struct{}

// WithCaller returns ctx carrying the authenticated caller of a call, so that the Router can bound
// what one caller holds. CallerAuthInterceptor and kas's HTTP listener set it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// anonymous is the one caller of a kas without caller authentication (dev mode, in-process callers
// that were not given one).
type anonymous struct{}

// CallerKey is the key that a call's caller is counted under: the caller of ctx, or one anonymous
// caller for calls without one (and for callers of a type that cannot be a map key).
func CallerKey(ctx context.Context) any {
	c, _ := ctx.Value(callerKey{}).(Caller)
	if c == nil || !reflect.TypeOf(c).Comparable() {
		return anonymous{}
	}
	return c
}
