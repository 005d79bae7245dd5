package h2conn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// reserved are the header fields that carry gRPC's own protocol, never metadata (gRPC-go's
// isReservedHeader).
var reserved = map[string]bool{
	"content-type":            true,
	"user-agent":              true,
	"grpc-message-type":       true,
	"grpc-encoding":           true,
	"grpc-message":            true,
	"grpc-status":             true,
	"grpc-timeout":            true,
	"grpc-status-details-bin": true,
	"te":                      true,
}

// addMetadata adds one metadata entry to a request header: binary values base64-encoded, as gRPC
// sends them.
func addMetadata(h []hpack.HeaderField, k string, vs ...string) ([]hpack.HeaderField, error) {
	k = strings.ToLower(k)
	if reserved[k] || strings.HasPrefix(k, ":") {
		return h, nil // gRPC-go drops them too
	}
	if !validKey(k) {
		return h, fmt.Errorf("h2conn: metadata key %q is not a valid header field name", k)
	}
	for _, v := range vs {
		if strings.HasSuffix(k, "-bin") {
			v = base64.RawStdEncoding.EncodeToString([]byte(v))
		}
		h = append(h, hpack.HeaderField{Name: k, Value: v})
	}
	return h, nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func addOutgoingMetadata(ctx context.Context, h []hpack.HeaderField) ([]hpack.HeaderField, error) {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return h, nil
	}
	var err error
	for k, vs := range md {
		if h, err = addMetadata(h, k, vs...); err != nil {
			return h, err
		}
	}
	return h, nil
}

// headerFields is a response header or trailer as received: lower-case names, pseudo-headers
// included.
type headerFields map[string][]string

func (h headerFields) get(name string) string {
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// toMetadata is the metadata of a response header or trailer: everything but gRPC's own fields and
// pseudo-headers, binary values decoded.
func toMetadata(h headerFields) (metadata.MD, error) {
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		if reserved[k] || strings.HasPrefix(k, ":") {
			continue
		}
		if strings.HasSuffix(k, "-bin") {
			decoded := make([]string, 0, len(vs))
			for _, v := range vs {
				b, err := decodeBinary(v)
				if err != nil {
					return nil, status.Errorf(codes.Internal, "h2conn: malformed binary metadata %q from the server: %v", k, err)
				}
				decoded = append(decoded, string(b))
			}
			md[k] = decoded
			continue
		}
		md[k] = vs
	}
	return md, nil
}

func decodeBinary(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// statusFromTrailer is a finished stream's status, from the trailer (or a trailers-only header): io.EOF
// for OK.
func statusFromTrailer(h headerFields) error {
	raw := h.get("grpc-status")
	if raw == "" {
		return status.Error(codes.Internal, "h2conn: the server ended the stream without a grpc-status")
	}
	code, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return status.Errorf(codes.Internal, "h2conn: malformed grpc-status %q from the server", raw)
	}
	if codes.Code(code) == codes.OK {
		return errEOF
	}
	if details := h.get("grpc-status-details-bin"); details != "" {
		b, err := decodeBinary(details)
		if err == nil {
			var s spb.Status
			if proto.Unmarshal(b, &s) == nil && s.GetCode() == int32(code) {
				return status.FromProto(&s).Err()
			}
		}
	}
	return status.Error(codes.Code(code), decodeMessage(h.get("grpc-message")))
}

// decodeMessage undoes gRPC's percent-encoding of grpc-message; a malformed one is shown as it came.
func decodeMessage(m string) string {
	if !strings.Contains(m, "%") {
		return m
	}
	d, err := url.PathUnescape(m)
	if err != nil {
		return m
	}
	return d
}

// httpStatusError is gRPC's status for a response that is not gRPC's (gRPC's HTTP to gRPC mapping).
func httpStatusError(raw string) error {
	code, err := strconv.Atoi(raw)
	if err != nil {
		return status.Errorf(codes.Internal, "h2conn: malformed HTTP status %q from the server", raw)
	}
	c := codes.Unknown
	switch code {
	case http.StatusBadRequest:
		c = codes.Internal
	case http.StatusUnauthorized:
		c = codes.Unauthenticated
	case http.StatusForbidden:
		c = codes.PermissionDenied
	case http.StatusNotFound:
		c = codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		c = codes.Unavailable
	}
	return status.Errorf(c, "h2conn: unexpected HTTP status code received from server: %d (%s)", code, http.StatusText(code))
}

func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// statusFromTransport is gRPC's status for an error of the HTTP/2 client that is not the caller's
// context: a reset stream by its code, anything else (the connection broke, GOAWAY, a failed dial) is
// Unavailable, as gRPC-go reports a broken transport.
func statusFromTransport(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	var se http2.StreamError
	if errors.As(err, &se) {
		c := codes.Internal
		switch se.Code {
		case http2.ErrCodeRefusedStream:
			c = codes.Unavailable
		case http2.ErrCodeCancel:
			c = codes.Canceled
		case http2.ErrCodeEnhanceYourCalm:
			c = codes.ResourceExhausted
		case http2.ErrCodeInadequateSecurity:
			c = codes.PermissionDenied
		}
		return status.Errorf(c, "stream terminated by RST_STREAM with error code: %v", se.Code)
	}
	return status.Errorf(codes.Unavailable, "connection error: %v", err)
}

// encodeTimeout is grpc-timeout's value: at most eight digits and a unit, rounded up.
func encodeTimeout(t time.Duration) string {
	const maxDigits = 99999999
	units := []struct {
		d    time.Duration
		name string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}, {time.Hour, "H"}}
	for _, u := range units {
		v := (t + u.d - 1) / u.d
		if v <= maxDigits {
			return strconv.FormatInt(int64(v), 10) + u.name
		}
	}
	return strconv.FormatInt(maxDigits, 10) + "H"
}
