package tunclient

import (
	"context"

	"google.golang.org/grpc/credentials"
)

// TokenCredentials sends "authorization: Bearer <token>" with every call to kas.
type TokenCredentials struct {
	Token string
	// AllowInsecure permits sending the token without TLS. Only for loopback development.
	AllowInsecure bool
}

var _ credentials.PerRPCCredentials = TokenCredentials{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + c.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c TokenCredentials) RequireTransportSecurity() bool {
	return !c.AllowInsecure
}

// bearerCreds is TokenCredentials with its metadata built once: gRPC asks for it on every tunnel stream,
// one per call, and only reads it.
type bearerCreds struct {
	md            map[string]string
	allowInsecure bool
}

func newBearerCreds(token string, allowInsecure bool) bearerCreds {
	return bearerCreds{md: map[string]string{"authorization": "Bearer " + token}, allowInsecure: allowInsecure}
}

func (c bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.md, nil
}

func (c bearerCreds) RequireTransportSecurity() bool {
	return !c.allowInsecure
}
