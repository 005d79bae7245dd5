package httptunnel

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool/codectest"
)

// FuzzProtoFastPath checks the HTTP tunnel's messages decoded and encoded by vtprotobuf's code against
// protobuf's (codectest.Agree says how).
func FuzzProtoFastPath(f *testing.F) {
	hdr := wireHeader(map[string][]string{"Content-Type": {"text/plain"}, "X-Many": {"a", "", "b"}})
	for _, m := range []proto.Message{
		&HTTPRequest{Msg: &HTTPRequest_Header_{Header: &HTTPRequest_Header{Method: "GET", Path: "/p", RawQuery: "q=1", Header: hdr, ContentLength: -1, Host: "h"}}},
		&HTTPRequest{Msg: &HTTPRequest_Body{Body: &BodyChunk{Data: []byte("body")}}},
		&HTTPRequest{Msg: &HTTPRequest_End_{End: &HTTPRequest_End{}}},
		&HTTPResponse{Msg: &HTTPResponse_Header_{Header: &HTTPResponse_Header{StatusCode: 200, Header: hdr, ContentLength: 4, Body: []byte("body")}}},
		&HTTPResponse{Msg: &HTTPResponse_End_{End: &HTTPResponse_End{Trailer: hdr}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x06, 0x22, 0x04, 0x0a, 0x02, 0xff, 0xfe}) // a header name that is not UTF-8
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []proto.Message{&HTTPRequest{}, &HTTPResponse{}} {
			if err := codectest.Agree(b, m); err != nil {
				t.Fatal(err)
			}
		}
	})
}
