// Package testcerts makes a throwaway certificate authority with server and client certificates for
// loopback, written as PEM files the way an operator would hand them to kas and agentk.
package testcerts

import (
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/pki"
)

// Set is a CA and the files of certificates it signed.
type Set struct {
	Dir string
	// CAFile verifies both the server and the client certificates.
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// Pool holds the CA.
	Pool *x509.CertPool

	ca *pki.CA
}

// validity is long enough for any test run.
const validity = 24 * time.Hour

// New writes a CA, a server certificate for 127.0.0.1, ::1 and localhost, and a client certificate into
// a temporary directory.
func New(t testing.TB) *Set {
	t.Helper()
	s := &Set{Dir: t.TempDir()}
	ca, err := pki.NewCA("tunnelbench test CA", validity)
	if err != nil {
		t.Fatal(err)
	}
	s.ca = ca
	s.CAFile = s.write(t, "ca.pem", ca.CertPEM)
	s.Pool = x509.NewCertPool()
	s.Pool.AddCert(ca.Cert)
	s.ServerCert, s.ServerKey = filepath.Join(s.Dir, "server.pem"), filepath.Join(s.Dir, "server-key.pem")
	s.RotateServer(t)
	s.ClientCert, s.ClientKey, _ = s.issue(t, "client", "agent", x509.ExtKeyUsageClientAuth)
	return s
}

// RotateServer replaces the server certificate files with a new certificate and returns its serial
// number, as a certificate renewal would.
func (s *Set) RotateServer(t testing.TB) *big.Int {
	t.Helper()
	cert, key, c := s.issue(t, "server-next", "kas", x509.ExtKeyUsageServerAuth)
	// Rename over the old files: a reader never sees a half-written one.
	for _, p := range [][2]string{{cert, s.ServerCert}, {key, s.ServerKey}} {
		if err := os.Rename(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	return c.SerialNumber
}

func (s *Set) issue(t testing.TB, name, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	certPEM, keyPEM, cert, err := s.ca.Issue(pki.Leaf{CN: cn, Usage: usage, DNSNames: []string{"localhost"}, IPs: pki.Loopback, Validity: validity})
	if err != nil {
		t.Fatal(err)
	}
	return s.write(t, name+".pem", certPEM), s.write(t, name+"-key.pem", keyPEM), cert
}

func (s *Set) write(t testing.TB, name string, pemBytes []byte) string {
	t.Helper()
	p := filepath.Join(s.Dir, name)
	if err := os.WriteFile(p, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
