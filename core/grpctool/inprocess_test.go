package grpctool

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoHandler echoes every frame, reports what it saw in the header and trailer, and fails with the
// status named by the "fail" metadata.
func echoHandler(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	method, _ := grpc.MethodFromServerStream(ss)
	hdr := metadata.Pairs("method", method, "x", firstOr(md.Get("x"), ""))
	if _, ok := ctx.Deadline(); ok {
		hdr.Set("deadline", "yes")
	}
	if err := grpc.SetHeader(ctx, hdr); err != nil {
		return err
	}
	ss.SetTrailer(metadata.Pairs("t", "1"))
	if len(md.Get("fail")) > 0 {
		return status.Error(codes.FailedPrecondition, md.Get("fail")[0])
	}
	if len(md.Get("block")) > 0 {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	for {
		var f RawFrame
		err := ss.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}

func firstOr(v []string, def string) string {
	if len(v) == 0 {
		return def
	}
	return v[0]
}

func TestInProcessUnary(t *testing.T) {
	c := NewInProcessConn(echoHandler)
	defer c.Wait()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x", "y"), time.Minute)
	defer cancel()
	var hdr, trl metadata.MD
	var out wrapperspb.StringValue
	if err := c.Invoke(ctx, "/s.S/M", wrapperspb.String("hi"), &out, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	if out.GetValue() != "hi" {
		t.Fatalf("echo %q", out.GetValue())
	}
	if hdr.Get("method")[0] != "/s.S/M" || hdr.Get("x")[0] != "y" || len(hdr.Get("deadline")) != 1 {
		t.Fatalf("header %v", hdr)
	}
	if trl.Get("t")[0] != "1" {
		t.Fatalf("trailer %v", trl)
	}
	err := c.Invoke(metadata.AppendToOutgoingContext(ctx, "fail", "nope"), "/s.S/M", wrapperspb.String("hi"), &out, grpc.Trailer(&trl))
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "nope" {
		t.Fatalf("status %v", err)
	}
	if trl.Get("t")[0] != "1" {
		t.Fatalf("trailer with an error %v", trl)
	}
}

func TestInProcessUnaryTooManyResponses(t *testing.T) {
	c := NewInProcessConn(func(_ any, ss grpc.ServerStream) error {
		for range inProcessWindow + 1 {
			if err := ss.SendMsg(&RawFrame{}); err != nil {
				return err
			}
		}
		return nil
	})
	var out RawFrame
	if err := c.Invoke(context.Background(), "/s.S/M", &RawFrame{}, &out); status.Code(err) != codes.Internal {
		t.Fatalf("got %v", err)
	}
	c.Wait()
}

func TestInProcessStream(t *testing.T) {
	c := NewInProcessConn(echoHandler)
	defer c.Wait()
	cs, err := c.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/s.S/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if err := cs.SendMsg(&RawFrame{Data: []byte(s)}); err != nil {
			t.Fatal(err)
		}
		var f RawFrame
		if err := cs.RecvMsg(&f); err != nil || string(f.Data) != s {
			t.Fatalf("recv %q %v", f.Data, err)
		}
	}
	h, err := cs.Header()
	if err != nil || h.Get("method")[0] != "/s.S/Bidi" {
		t.Fatalf("header %v %v", h, err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(&RawFrame{}); err != io.EOF {
		t.Fatalf("end %v", err)
	}
	if cs.Trailer().Get("t")[0] != "1" {
		t.Fatalf("trailer %v", cs.Trailer())
	}
}

func TestInProcessCancelReachesHandler(t *testing.T) {
	c := NewInProcessConn(echoHandler)
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "block", "1"))
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/s.S/Block")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := cs.RecvMsg(&RawFrame{}); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel %v", err)
	}
	c.Wait() // the handler returned
	if _, err := c.NewStream(ctx, &grpc.StreamDesc{}, "/s.S/M"); status.Code(err) != codes.Canceled {
		t.Fatalf("stream on a done context %v", err)
	}
}

func TestInProcessMovesAcrossTypes(t *testing.T) {
	// A typed request reaches a raw handler and a raw answer reaches a typed caller, through the codec.
	c := NewInProcessConn(echoHandler)
	defer c.Wait()
	var out wrapperspb.BytesValue
	if err := c.Invoke(context.Background(), "/s.S/M", wrapperspb.Bytes([]byte{1, 2}), &out); err != nil {
		t.Fatal(err)
	}
	if string(out.GetValue()) != string([]byte{1, 2}) {
		t.Fatalf("got %v", out.GetValue())
	}
}
