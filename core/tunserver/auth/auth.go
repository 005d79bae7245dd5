// Package auth authenticates the three kinds of peers kas has: agents (agent tokens), callers (caller
// tokens and the agents each may reach) and other kas replicas (short-lived tokens signed with a shared
// secret). It never logs or returns a token, and compares every secret in constant time.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// AgentAuthenticator maps an agent's bearer token to its agent id.
type AgentAuthenticator interface {
	// AuthenticateAgent returns the agent id for token, or an Unauthenticated status.
	AuthenticateAgent(ctx context.Context, token string) (agentID int64, err error)
}

// StaticTokens is the default AgentAuthenticator: a fixed set of tokens, each for one agent id.
type StaticTokens struct {
	// byHash is keyed by the SHA-256 of the token, so that lookups do not compare secrets byte by byte.
	byHash map[[sha256.Size]byte]staticToken
}

type staticToken struct {
	token   string
	agentID int64
}

// NewStaticTokens builds the authenticator from token -> agent id. Empty tokens are refused.
func NewStaticTokens(tokens map[string]int64) (*StaticTokens, error) {
	s := &StaticTokens{byHash: make(map[[sha256.Size]byte]staticToken, len(tokens))}
	for tok, id := range tokens {
		if tok == "" {
			return nil, fmt.Errorf("agent %d has an empty token", id)
		}
		s.byHash[sha256.Sum256([]byte(tok))] = staticToken{token: tok, agentID: id}
	}
	return s, nil
}

var errInvalidAgentToken = status.Error(codes.Unauthenticated, "invalid agent token")

// AuthenticateAgent implements AgentAuthenticator.
func (s *StaticTokens) AuthenticateAgent(_ context.Context, token string) (int64, error) {
	e, ok := s.byHash[sha256.Sum256([]byte(token))]
	if !ok || subtle.ConstantTimeCompare([]byte(e.token), []byte(token)) != 1 {
		return 0, errInvalidAgentToken
	}
	return e.agentID, nil
}

// BearerToken reads "authorization: Bearer <token>" from incoming metadata.
func BearerToken(ctx context.Context) (string, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 {
		return "", status.Error(codes.Unauthenticated, "missing authorization metadata: send \"authorization: Bearer <token>\"")
	}
	if len(vals) > 1 {
		return "", status.Error(codes.Unauthenticated, "authorization metadata must be present once")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", status.Error(codes.Unauthenticated, "authorization metadata is not of the form \"Bearer <token>\"")
	}
	return token, nil
}
