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
