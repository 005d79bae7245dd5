package auth

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func privateToken(t *testing.T, secret string, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer:    PrivateTokenIssuer,
		Audience:  jwt.ClaimStrings{PrivateTokenAudience},
		IssuedAt:  jwt.NewNumericDate(time.Now().Add(-time.Hour)),
		ExpiresAt: jwt.NewNumericDate(exp),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestPrivateAuthRemembersOnlyValidTokensUntilTheyExpire(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	a, err := NewPrivateAuth([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	good, err := a.sign()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second time from memory
		if err := a.check(good); err != nil {
			t.Fatalf("check %d of a fresh token: %v", i, err)
		}
	}
	forged := privateToken(t, "another secret, of the same length!", time.Now().Add(time.Minute))
	for i := range 2 {
		if a.check(forged) == nil {
			t.Fatalf("check %d accepted a token signed with another secret", i)
		}
	}
	expired := privateToken(t, secret, time.Now().Add(-time.Minute))
	if a.check(expired) == nil {
		t.Fatal("an expired token was accepted")
	}
	// A remembered token is accepted only while it is valid: past its expiry it is checked again.
	a.verifiedMu.Lock()
	a.verified[sha256.Sum256([]byte(expired))] = time.Now().Add(-time.Minute)
	a.verifiedMu.Unlock()
	if a.check(expired) == nil {
		t.Fatal("a remembered token was accepted after it expired")
	}
}

func TestPrivateAuthMemoryIsBounded(t *testing.T) {
	a, err := NewPrivateAuth([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 3 * maxVerified {
		a.remember(sha256.Sum256(fmt.Appendf(nil, "token %d", i)), now.Add(time.Minute), now)
	}
	if n := len(a.verified); n > maxVerified {
		t.Fatalf("%d tokens remembered, the bound is %d", n, maxVerified)
	}
}
