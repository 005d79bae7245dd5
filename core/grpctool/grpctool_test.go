package grpctool

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSplitMethod(t *testing.T) {
	svc, m, err := SplitMethod("/pkg.Service/Method")
	if err != nil || svc != "pkg.Service" || m != "Method" {
		t.Fatalf("got %q %q %v", svc, m, err)
	}
	for _, bad := range []string{"", "/", "pkg.Service/Method", "/pkg.Service", "/pkg.Service/", "//Method", "/a/b/c"} {
		if _, _, err := SplitMethod(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRawCodecPassesBytesAndFallsBackToProto(t *testing.T) {
	c := RawCodec{}
	out, err := c.Marshal(&RawFrame{Data: []byte("abc")})
	if err != nil || string(out.Materialize()) != "abc" {
		t.Fatalf("raw marshal: %q %v", out.Materialize(), err)
	}
	var f RawFrame
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer("xyz")}, &f); err != nil || string(f.Data) != "xyz" {
		t.Fatalf("raw unmarshal: %q %v", f.Data, err)
	}
	msg := wrapperspb.String("hello")
	out, err = c.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var back wrapperspb.StringValue
	if err := c.Unmarshal(out, &back); err != nil || !proto.Equal(msg, &back) {
		t.Fatalf("proto fallback: %v %v", &back, err)
	}
	if c.Name() != "proto" {
		t.Fatalf("name %q", c.Name())
	}
}
