package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Private API tokens: kas instances sharing a secret sign short-lived HS256 tokens for each other.
const (
	PrivateTokenIssuer   = "tunnelbench-kas"
	PrivateTokenAudience = "tunnelbench-kas-private-api"
	// PrivateTokenValidity is how long a token is accepted: a stolen one is soon worthless.
	PrivateTokenValidity = 10 * time.Second
	// PrivateTokenLeeway tolerates clock skew between kas machines.
	PrivateTokenLeeway = 5 * time.Second
	// MinPrivateSecretLen bounds how weak a shared secret may be.
	MinPrivateSecretLen = 32
)

// PrivateAuth signs and checks the tokens of the private API.
type PrivateAuth struct {
	secret []byte

	mu      sync.Mutex
	token   string
	expires time.Time

	// verified remembers tokens that passed check, by SHA-256, until they expire: a routing kas reuses
	// its token for seconds, and parsing and verifying it again on every call costs more than the rest
	// of the gateway's work on it.
	verifiedMu sync.Mutex
	verified   map[[sha256.Size]byte]time.Time
}

// maxVerified bounds the remembered tokens: a few per routing kas.
const maxVerified = 1024

// NewPrivateAuth returns the signer and checker for secret, which every kas of a deployment shares.
func NewPrivateAuth(secret []byte) (*PrivateAuth, error) {
	if len(secret) < MinPrivateSecretLen {
		return nil, fmt.Errorf("private API secret is %d bytes, it must be at least %d", len(secret), MinPrivateSecretLen)
	}
	return &PrivateAuth{secret: secret}, nil
}

// sign returns a token valid for PrivateTokenValidity, reusing one that still has over half its life:
// signing per call would cost more than it protects.
func (a *PrivateAuth) sign() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.token != "" && now.Add(PrivateTokenValidity/2).Before(a.expires) {
		return a.token, nil
	}
	exp := now.Add(PrivateTokenValidity)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer:    PrivateTokenIssuer,
		Audience:  jwt.ClaimStrings{PrivateTokenAudience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
	}).SignedString(a.secret)
	if err != nil {
		return "", err
	}
	a.token, a.expires = tok, exp
	return tok, nil
}

// check verifies a token: signature, issuer, audience and validity, with leeway for clock skew.
func (a *PrivateAuth) check(token string) error {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.verifiedMu.Lock()
	exp, ok := a.verified[key]
	a.verifiedMu.Unlock()
	if ok && now.Before(exp.Add(PrivateTokenLeeway)) {
		return nil
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(PrivateTokenIssuer),
		jwt.WithAudience(PrivateTokenAudience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(PrivateTokenLeeway),
	)
	if err != nil {
		return err
	}
	a.remember(key, claims.ExpiresAt.Time, now)
	return nil
}

func (a *PrivateAuth) remember(key [sha256.Size]byte, exp, now time.Time) {
	a.verifiedMu.Lock()
	defer a.verifiedMu.Unlock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		fresh := make(map[[sha256.Size]byte]time.Time)
		for k, e := range a.verified {
			if now.Before(e.Add(PrivateTokenLeeway)) && len(fresh) < maxVerified/2 {
				fresh[k] = e
			}
		}
		a.verified = fresh
	}
	a.verified[key] = exp
}

// Credentials attaches a fresh token to every call to another kas.
func (a *PrivateAuth) Credentials() credentials.PerRPCCredentials {
	return privateCreds{a: a}
}

type privateCreds struct{ a *PrivateAuth }

func (c privateCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := c.a.sign()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity is false: plaintext private APIs are allowed between kas on a trusted network;
// the token still proves the caller knows the secret.
func (privateCreds) RequireTransportSecurity() bool { return false }

// StreamInterceptor refuses private API calls without a valid token.
func (a *PrivateAuth) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		tok, err := BearerToken(ss.Context())
		if err != nil {
			return err
		}
		if err := a.check(tok); err != nil {
			reason := "invalid"
			if errors.Is(err, jwt.ErrTokenExpired) {
				reason = "expired"
			}
			return status.Errorf(codes.Unauthenticated, "private API: %s token", reason)
		}
		return handler(srv, ss)
	}
}
