package secrets

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGenerate: every file, private to its owner; kas's certificate verifies with the CA for the names
// that agents, callers and other replicas dial in the cluster, and for nothing else.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	files, err := Generate(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(Files) {
		t.Fatalf("wrote %v", files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || st.Size() == 0 {
			t.Errorf("%s: mode %v, %d bytes", f, st.Mode(), st.Size())
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(read(CACert))) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode([]byte(read(KasCert)))
	kas, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if kas.NotAfter.Before(time.Now().Add(DefaultValidity - 2*time.Hour)) {
		t.Errorf("kas certificate ends %s", kas.NotAfter)
	}
	for _, name := range []string{"kas", "kas.tunnelbench.svc", "kas.tunnelbench.svc.cluster.local", "kas-0.kas-peers",
		"kas-2.kas-peers", "kas-1.kas-peers.tunnelbench.svc.cluster.local", "localhost", "127.0.0.1"} {
		if _, err := kas.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"redis", "kas.other", "a.b.kas-peers", "kas-peers", "example.com"} {
		if _, err := kas.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err == nil {
			t.Errorf("%s verified", name)
		}
	}
	if _, err := tls.X509KeyPair([]byte(read(KasCert)), []byte(read(KasKey))); err != nil {
		t.Errorf("kas.crt and kas.key: %v", err)
	}

	agentToken, callerToken := strings.TrimSpace(read(AgentToken)), strings.TrimSpace(read(CallerToken))
	if !strings.Contains(read(AgentTokens), "\n1="+agentToken+"\n") || !strings.Contains(read(CallerTokens), "\n*="+callerToken+"\n") {
		t.Errorf("token lists do not hold the tokens:\n%s%s", read(AgentTokens), read(CallerTokens))
	}
	if agentToken == callerToken || len(strings.TrimSpace(read(PrivateSecret))) < 32 || len(strings.TrimSpace(read(RedisPassword))) < 20 {
		t.Error("weak or shared secrets")
	}

	// A second run refuses to replace what a deployment may use; Force does.
	if _, err := Generate(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("second run: %v", err)
	}
	if read(AgentToken) != agentToken+"\n" {
		t.Error("the refused run changed a file")
	}
	if _, err := Generate(Options{Dir: dir, Force: true}); err != nil {
		t.Fatal(err)
	}
	if read(AgentToken) == agentToken+"\n" {
		t.Error("Force kept the old token")
	}
}

// TestNamespace: the certificate follows the namespace the deployment runs in.
func TestNamespace(t *testing.T) {
	names := Options{Namespace: "bench-7"}.KasNames()
	want := map[string]bool{"kas.bench-7.svc": true, "*.kas-peers.bench-7.svc.cluster.local": true, "kas": true}
	for _, n := range names {
		delete(want, n)
		if strings.Contains(n, DefaultNS) {
			t.Errorf("%s names the default namespace", n)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing %v in %v", want, names)
	}
	if _, err := Generate(Options{Dir: t.TempDir(), AgentID: -1}); err == nil {
		t.Error("a negative agent id was accepted")
	}
}
