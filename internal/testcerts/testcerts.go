// Package testcerts makes a throwaway certificate authority with server and client certificates for
// loopback, written as PEM files the way an operator would hand them to kas and agentk.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
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

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// New writes a CA, a server certificate for 127.0.0.1, ::1 and localhost, and a client certificate into
// a temporary directory.
func New(t testing.TB) *Set {
	t.Helper()
	s := &Set{Dir: t.TempDir()}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "tunnelbench test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	s.caKey = key
	s.CAFile = s.write(t, "ca.pem", "CERTIFICATE", der)
	s.Pool = x509.NewCertPool()
	s.Pool.AddCert(s.ca)
	s.ServerCert, s.ServerKey = filepath.Join(s.Dir, "server.pem"), filepath.Join(s.Dir, "server-key.pem")
	s.RotateServer(t)
	s.ClientCert, s.ClientKey = s.issue(t, "client", "agent", x509.ExtKeyUsageClientAuth)
	return s
}

// RotateServer replaces the server certificate files with a new certificate and returns its serial
// number, as a certificate renewal would.
func (s *Set) RotateServer(t testing.TB) *big.Int {
	t.Helper()
	cert, key := s.issue(t, "server-next", "kas", x509.ExtKeyUsageServerAuth)
	// Rename over the old files: a reader never sees a half-written one.
	for _, p := range [][2]string{{cert, s.ServerCert}, {key, s.ServerKey}} {
		if err := os.Rename(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	pemBytes, err := os.ReadFile(s.ServerCert)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

func (s *Set) issue(t testing.TB, name, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return s.write(t, name+".pem", "CERTIFICATE", der), s.write(t, name+"-key.pem", "PRIVATE KEY", keyDER)
}

func (s *Set) write(t testing.TB, name, blockType string, der []byte) string {
	t.Helper()
	p := filepath.Join(s.Dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
