package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// TargetSecurity is how the harness reaches a secured --target deployment: TLS and a caller bearer
// token, from files. The fields are agentk's flags for its own connection to kas, under the same names,
// so that one set of files serves both: --kas-tls, --kas-ca-file, --kas-server-name, --tls-cert-file,
// --tls-key-file and --token-file (here the caller token, which kas's --caller-tokens-file lists).
//
// It applies to the kas public API (and an https:// --target-metrics), never to --target-direct, which
// is a plaintext demo server next to the agent.
type TargetSecurity struct {
	// TLS verifies kas with the system roots; CAFile implies TLS and verifies with its CAs instead.
	TLS    bool
	CAFile string
	// ServerName is the name expected in kas's certificate (default: the host of the target address).
	ServerName string
	// CertFile and KeyFile are a client certificate, for a kas that asks for one.
	CertFile, KeyFile string
	// TokenFile holds the caller token, sent as "authorization: Bearer <token>".
	TokenFile string
}

var errTargetSecurity = errors.New("--kas-tls, --kas-ca-file, --kas-server-name, --tls-cert-file, --tls-key-file and --token-file need --target")

// TLSOn says whether calls to the target use TLS.
func (s TargetSecurity) TLSOn() bool { return s.TLS || s.CAFile != "" }

// IsZero says that nothing is set: a plaintext target without a token.
func (s TargetSecurity) IsZero() bool { return s == TargetSecurity{} }

// tlsConfig loads the files and returns the TLS configuration of calls to the target, nil for plaintext.
// Its errors name the flags.
func (s TargetSecurity) tlsConfig() (*tls.Config, error) {
	if !s.TLSOn() {
		if s.ServerName != "" || s.CertFile != "" || s.KeyFile != "" {
			return nil, errors.New("--kas-server-name, --tls-cert-file and --tls-key-file need TLS: give --kas-ca-file or --kas-tls")
		}
		return nil, nil
	}
	var (
		errs  []error
		roots *x509.CertPool // nil: the system's
	)
	if s.CAFile != "" {
		var err error
		if roots, err = tlsfiles.CertPool(s.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("--kas-ca-file: %w", err))
		}
	}
	var cert *tlsfiles.Reloader
	switch {
	case s.CertFile != "" && s.KeyFile != "":
		var err error
		if cert, err = tlsfiles.NewReloader(s.CertFile, s.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err))
		}
	case s.CertFile != "" || s.KeyFile != "":
		errs = append(errs, errors.New("a client certificate needs both --tls-cert-file and --tls-key-file"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tlsfiles.Client(roots, s.ServerName, cert), nil
}

// dialOptions are the options of connections to the target: its TLS and its caller token. Each
// problem names its flag.
func (s TargetSecurity) dialOptions() ([]grpc.DialOption, error) {
	var (
		opts []grpc.DialOption
		errs []error
	)
	tc, err := s.tlsConfig()
	if err != nil {
		errs = append(errs, err)
	} else if tc != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	if s.TokenFile != "" {
		token, err := cli.ReadSecretFile(s.TokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--token-file: %w", err))
		}
		// A plaintext kas with caller tokens is the operator's choice (kas allows it); send the token
		// there too rather than fail every call with a transport-security error.
		opts = append(opts, grpc.WithPerRPCCredentials(callerToken{md: map[string]string{"authorization": "Bearer " + token}, tls: s.TLSOn()}))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return opts, nil
}

// callerToken sends the caller's bearer token with every call, built once.
type callerToken struct {
	md  map[string]string
	tls bool
}

func (c callerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.md, nil
}

func (c callerToken) RequireTransportSecurity() bool { return c.tls }
