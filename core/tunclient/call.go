package tunclient

import (
	"context"

	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/core/tunclient/serverstream"
)

// serveCall serves the call kas sent through the tunnel: itself when the service is registered on the
// agent (serveLocal), otherwise by replaying it against an exposed upstream (or the bufconn server) and
// streaming the answer back. It returns when the call is over on both sides, reporting whether the
// tunnel can take another call (a reusable tunnel whose call ended cleanly).
func (a *Agent) serveCall(streamCtx context.Context, tc tunnelCall, info *rpc.RequestInfo) bool {
	service, _, err := grpctool.SplitMethod(info.GetMethodName())
	if err != nil {
		return a.failCall(tc, status.Error(codes.InvalidArgument, err.Error()))
	}
	ctx, cancelCall, md, end := a.callContext(streamCtx, info)
	defer end()
	target := a.target(service)
	if target == nil {
		return a.serveLocal(ctx, cancelCall, md, tc, info.GetMethodName())
	}
	callCtx := metadata.NewOutgoingContext(ctx, md)
	cs, err := target.NewStream(callCtx, grpctool.BidiStreamDesc, info.GetMethodName(), grpctool.RawCallCodec())
	if err != nil {
		return a.failCall(tc, err)
	}

	// kas -> service. It ends at kas's end of the call: after the answer, or early when the caller
	// cancelled, in which case the service's call is cancelled too.
	kasDone := make(chan bool, 1)
	a.workers.Go(func() {
		defer cancelCall()
		sendOK := true
		ended, _ := tc.kasSide(func(m *rpc.ConnectResponse, _ *[]byte) {
			switch x := m.GetMsg().(type) {
			case *rpc.ConnectResponse_Message:
				// After a failed send the service has finished; keep reading so kas is never blocked.
				// A pooled buffer is not handed on: the upstream's interceptors and stats handlers,
				// which are not ours, may read a sent message later (gRPC allows it).
				if sendOK && cs.SendMsg(&grpctool.RawFrame{Data: x.Message.GetData()}) != nil {
					sendOK = false
				}
			case *rpc.ConnectResponse_CloseSend:
				if sendOK {
					_ = cs.CloseSend()
				}
			}
		}, func(err error) {
			a.cfg.Log.Warn("kas broke the tunnel protocol", "method", info.GetMethodName(), "err", err)
		})
		kasDone <- ended
	})

	// service -> kas: header, every message, trailer, final status.
	a.answer(tc.stream, cs)
	ours := tc.endOurs() == nil
	// kas ends its side as soon as it has the answer; if it does not, stop waiting after the drain
	// timeout.
	timer := time.AfterFunc(tc.drain, tc.cancelStream)
	defer timer.Stop()
	return <-kasDone && ours && tc.reuse
}

// callContext is the context a call runs in: the caller's trace continued under this agent's span
// (when the agent traces), the caller's deadline, and cancel. md is the request metadata with that trace
// context in it, for services that read it from there. end cancels the context and ends the span.
func (a *Agent) callContext(streamCtx context.Context, info *rpc.RequestInfo) (ctx context.Context, cancel context.CancelFunc, md metadata.MD, end func()) {
	md = rpc.ValuesToMeta(info.GetMeta())
	if md == nil {
		md = metadata.MD{}
	}
	spanCtx, span := streamCtx, tracing.NoSpan
	if !tracing.Off(a.cfg.Tracer) {
		spanCtx, span = a.cfg.Tracer.Start(tracing.Propagator.Extract(streamCtx, tracing.ValuesCarrier(info.GetMeta())), "agent.call",
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("rpc.method", info.GetMethodName())))
		tracing.Propagator.Inject(spanCtx, tracing.MDCarrier(md))
	}
	ctx, cancel = context.WithCancel(spanCtx)
	cancelDeadline := context.CancelFunc(func() {})
	if dl := info.GetDeadline(); dl != nil {
		ctx, cancelDeadline = context.WithDeadline(ctx, dl.AsTime())
	}
	return ctx, cancel, md, func() {
		cancelDeadline()
		cancel()
		span.End()
	}
}

// clientStream is the part of grpc.ClientStream that answer reads.
type clientStream interface {
	Header() (metadata.MD, error)
	Trailer() metadata.MD
	RecvMsg(m any) error
}

func (a *Agent) answer(stream rpc.ReverseTunnel_ConnectClient, cs clientStream) {
	hdr, err := cs.Header()
	if err != nil {
		_ = stream.Send(serverstream.ErrorMsg(err))
		return
	}
	if stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{Meta: rpc.MetaToValues(hdr)}}}) != nil {
		return
	}
	for {
		var f grpctool.RawFrame
		err := cs.RecvMsg(&f)
		if err != nil {
			trailer := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{Meta: rpc.MetaToValues(cs.Trailer())}}}
			if stream.Send(trailer) != nil || err == io.EOF {
				return
			}
			_ = stream.Send(serverstream.ErrorMsg(err))
			return
		}
		if stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: f.Data}}}) != nil {
			return
		}
	}
}

// failCall answers a call that failed before any header (descriptor -> error) and waits for kas to end
// its side of the call.
func (a *Agent) failCall(tc tunnelCall, err error) bool {
	if tc.stream.Send(serverstream.ErrorMsg(err)) != nil || tc.endOurs() != nil {
		tc.cancelStream()
		return false
	}
	return tc.drainUntilEnd()
}
