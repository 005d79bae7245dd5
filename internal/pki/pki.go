// Package pki makes a certificate authority and the certificates it signs, as PEM: the one place that
// knows the templates, for the operator's secrets (deploy/secrets) and the tests' (internal/testcerts).
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"time"
)

// backdate: the clocks of the machines that check a certificate may be a little behind the one that made it.
const backdate = time.Hour

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	// CertPEM is Cert as a PEM file.
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA makes a CA named cn, valid for validity, that signs end-entity certificates only.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	// A nil SerialNumber: x509 picks a random one.
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: encode("CERTIFICATE", der), key: key}, nil
}

// Leaf describes an end-entity certificate.
type Leaf struct {
	CN       string
	Usage    x509.ExtKeyUsage
	DNSNames []string
	IPs      []net.IP
	Validity time.Duration
}

// Loopback is the addresses a certificate for loopback covers.
var Loopback = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

// Issue makes a certificate for l signed by the CA (with a random serial number), and its key, as PEM.
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, cert *x509.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: l.CN},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(l.Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{l.Usage},
		DNSNames:    l.DNSNames,
		IPAddresses: l.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, nil, err
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return encode("CERTIFICATE", der), encode("PRIVATE KEY", keyDER), cert, nil
}

func encode(blockType string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
}
