package kas

import (
	"crypto/x509"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
)

// listenerCreds are the transport credentials of each kind of listener; all nil for plaintext.
type listenerCreds struct {
	// agent verifies agents' client certificates when an agent CA is set.
	agent credentials.TransportCredentials
	// server is the public, private and HTTP listeners'.
	server credentials.TransportCredentials
	// peer is how this kas dials other kas.
	peer credentials.TransportCredentials
}

// buildCreds loads the certificate (reloaded when its files change) and the CAs.
func (s *Server) buildCreds() (listenerCreds, error) {
	t := s.cfg.TLS
	if t == nil {
		return listenerCreds{}, nil
	}
	var err error
	if s.certs, err = tlsfiles.NewReloader(t.CertFile, t.KeyFile); err != nil {
		return listenerCreds{}, err
	}
	var agentCAs, peerCAs *x509.CertPool
	if t.AgentCAFile != "" {
		if agentCAs, err = tlsfiles.CertPool(t.AgentCAFile); err != nil {
			return listenerCreds{}, fmt.Errorf("agent CA: %w", err)
		}
	}
	if t.PeerCAFile != "" {
		if peerCAs, err = tlsfiles.CertPool(t.PeerCAFile); err != nil {
			return listenerCreds{}, fmt.Errorf("peer CA: %w", err)
		}
	}
	return listenerCreds{
		agent:  credentials.NewTLS(tlsfiles.Server(s.certs, agentCAs)),
		server: credentials.NewTLS(tlsfiles.Server(s.certs, nil)),
		peer:   credentials.NewTLS(tlsfiles.Client(peerCAs, "", nil)),
	}, nil
}

// withCreds adds c to opts, unless the listener is plaintext. A TLS connection is read without gRPC's
// read buffer: crypto/tls reads a whole record and hands it out from memory, so that 32 KiB buffer in
// front of it would save no system call, and an idle connection (thousands of agents) would hold it.
// A plaintext connection's buffer is lent from a pool only while it is read.
func withCreds(c credentials.TransportCredentials, opts []grpc.ServerOption) []grpc.ServerOption {
	if c == nil {
		return opts
	}
	return append(opts, grpc.Creds(c), grpc.ReadBufferSize(0))
}
