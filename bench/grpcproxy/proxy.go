// Package grpcproxy is the least a gRPC proxy does: every call of a service goes on to one backend as
// bytes, with its metadata, and the backend's answer, header, trailer and status come back. bench's
// grpc-proxy reference (bench/tunnels) puts it in front of direct gRPC servers, so that a run shows beside
// the tunnel what two gRPC hops cost by themselves: tunnel-public's caller → kas → agent is two hops too.
//
// It forwards; it does not route, check, limit or count. Unary methods go on with one Invoke on the
// handler's goroutine; streaming methods with the caller's messages copied on a goroutine of their own.
package grpcproxy

import (
	"context"
	"errors"
	"io"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// ServerOptions are what a server needs to host Register's handlers (messages pass as bytes), with the
// tuning kas's public API has, so that the proxy costs no more than it must: calls served on reused
// goroutines, and fixed flow-control windows (no bandwidth probes).
func ServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{grpctool.RawServerCodec(), grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0)))},
		grpctool.WindowServerOptions()...)
}

// Register serves every method of sd on s by forwarding it to backend. s must be made with
// ServerOptions.
func Register(s grpc.ServiceRegistrar, sd *grpc.ServiceDesc, backend grpc.ClientConnInterface) {
	out := grpc.ServiceDesc{ServiceName: sd.ServiceName, HandlerType: (*any)(nil), Metadata: sd.Metadata}
	for _, m := range sd.Methods {
		full := "/" + sd.ServiceName + "/" + m.MethodName
		out.Methods = append(out.Methods, grpc.MethodDesc{MethodName: m.MethodName, Handler: unary(backend, full)})
	}
	for _, st := range sd.Streams {
		full := "/" + sd.ServiceName + "/" + st.StreamName
		desc := &grpc.StreamDesc{StreamName: st.StreamName, ServerStreams: st.ServerStreams, ClientStreams: st.ClientStreams}
		out.Streams = append(out.Streams, grpc.StreamDesc{
			StreamName: st.StreamName, ServerStreams: st.ServerStreams, ClientStreams: st.ClientStreams,
			Handler: stream(backend, full, desc),
		})
	}
	s.RegisterService(&out, nil)
}

// outgoing is the backend call's context: the caller's, with its metadata passed on.
func outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return metadata.NewOutgoingContext(ctx, md)
}

func unary(backend grpc.ClientConnInterface, method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var req, resp grpctool.RawFrame
		if err := dec(&req); err != nil {
			return nil, err
		}
		var header, trailer metadata.MD
		err := backend.Invoke(outgoing(ctx), method, &req, &resp, grpctool.RawCallCodec(), grpc.Header(&header), grpc.Trailer(&trailer))
		if len(header) > 0 {
			_ = grpc.SetHeader(ctx, header)
		}
		if len(trailer) > 0 {
			_ = grpc.SetTrailer(ctx, trailer)
		}
		if err != nil {
			return nil, err
		}
		return &resp, nil
	}
}

func stream(backend grpc.ClientConnInterface, method string, desc *grpc.StreamDesc) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		ctx, cancel := context.WithCancel(outgoing(ss.Context()))
		defer cancel()
		cs, err := backend.NewStream(ctx, desc, method, grpctool.RawCallCodec())
		if err != nil {
			return err
		}
		// caller -> backend. It ends when the caller half-closes, or its call ends: once this handler
		// returned, RecvMsg fails.
		go func() {
			for {
				var f grpctool.RawFrame
				if err := ss.RecvMsg(&f); err != nil {
					if errors.Is(err, io.EOF) {
						_ = cs.CloseSend()
					} else {
						cancel()
					}
					return
				}
				if cs.SendMsg(&f) != nil {
					return // the backend's status comes from RecvMsg below
				}
			}
		}()
		// backend -> caller
		header, err := cs.Header()
		if err == nil && len(header) > 0 {
			if err := ss.SendHeader(header); err != nil {
				return err
			}
		}
		for {
			var f grpctool.RawFrame
			err := cs.RecvMsg(&f)
			if errors.Is(err, io.EOF) {
				ss.SetTrailer(cs.Trailer())
				return nil
			}
			if err != nil {
				ss.SetTrailer(cs.Trailer())
				return err
			}
			if err := ss.SendMsg(&f); err != nil {
				return err
			}
		}
	}
}
