// Package tlsfiles builds TLS configurations from PEM files and reloads certificates when their files
// change, so that kas picks up a renewed certificate without a restart.
//
// It never serves a half-written certificate: a file that fails to load keeps the previous one in use.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// CheckInterval is how often, at most, the files are looked at for changes.
const CheckInterval = time.Second

// Reloader holds a certificate and key loaded from files and reloads them when either file changes.
type Reloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	checked  time.Time
	lastErr  error
	reloaded int
}

// NewReloader loads certFile and keyFile (PEM).
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func modTime(path string) (time.Time, error) {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime(), nil
}

func (r *Reloader) load() error {
	cm, err := modTime(r.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	km, err := modTime(r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certMod, r.keyMod = &cert, cm, km
	return nil
}

// current returns the certificate, reloading it first when a file changed since the last check.
func (r *Reloader) current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= CheckInterval {
		r.checked = now
		cm, cerr := modTime(r.certFile)
		km, kerr := modTime(r.keyFile)
		if cerr == nil && kerr == nil && (!cm.Equal(r.certMod) || !km.Equal(r.keyMod)) {
			if err := r.load(); err != nil {
				// Keep serving the previous certificate (load changes nothing when it fails): the files
				// may be mid-rotation, and the next check tries again.
				r.lastErr = err
			} else {
				r.reloaded++
				r.lastErr = nil
			}
		}
	}
	return r.cert, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current()
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current()
}

// Reloads is how many times the files were reloaded, and the last reload error, if the last one failed.
func (r *Reloader) Reloads() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloaded, r.lastErr
}

// CertPool reads PEM CA certificates.
func CertPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// Server is a server configuration serving r's certificate. With clientCAs, clients must present a
// certificate signed by one of them (mutual TLS).
func Server(r *Reloader, clientCAs *x509.CertPool) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAs != nil {
		c.ClientCAs = clientCAs
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// Client is a client configuration that verifies servers with roots (nil: the system's) and presents
// cert when it is not nil.
func Client(roots *x509.CertPool, serverName string, cert *Reloader) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: serverName}
	if cert != nil {
		c.GetClientCertificate = cert.GetClientCertificate
	}
	return c
}
