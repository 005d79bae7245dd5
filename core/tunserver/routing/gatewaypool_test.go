package routing

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"google.golang.org/grpc/credentials"
)

func TestGatewayPoolWithTLSRefusesPlaintextPeers(t *testing.T) {
	auth, err := auth.NewPrivateAuth(make([]byte, auth.MinPrivateSecretLen))
	if err != nil {
		t.Fatal(err)
	}
	p := NewGatewayPool(auth, credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12}))
	defer p.Close()
	if _, err := p.Conn("grpc://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "refuses plaintext peers") {
		t.Fatalf("plaintext peer: %v", err)
	}
	if _, err := p.Conn("grpcs://127.0.0.1:1"); err != nil {
		t.Fatalf("TLS peer: %v", err)
	}
	plain := NewGatewayPool(auth, nil)
	defer plain.Close()
	if _, err := plain.Conn("grpcs://127.0.0.1:1"); err == nil {
		t.Fatal("a kas without TLS dialed a grpcs:// peer")
	}
}
