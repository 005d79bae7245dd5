package tunclient

import (
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// shutdownBeforeHeldEnd is a kas that accepts reuse, gives the tunnel one call, reads the agent's answer
// to its call_end and then stops: it ends the stream with the shutdown reason before its own call_end,
// which it holds for a moment after a completed call (tunnelwriter.CallEndDelay).
type shutdownBeforeHeldEnd struct {
	rpc.UnimplementedReverseTunnelServer
}

func (shutdownBeforeHeldEnd) Connect(stream rpc.ReverseTunnel_ConnectServer) error {
	var first grpctool.RawFrame
	if err := stream.RecvMsg(&first); err != nil {
		return err
	}
	if err := stream.SendHeader(metadata.Pairs(rpc.TunnelReuseHeaderKey, "1")); err != nil {
		return err
	}
	if err := stream.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{MethodName: "/nobody.Serves/This"}}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if m.GetCallEnd() != nil {
			break
		}
	}
	stream.SetTrailer(metadata.Pairs(rpc.TunnelEndReasonKey, rpc.EndReasonShutdown))
	return nil
}

// A reusable tunnel that kas ended for its shutdown right after a call, before the call's end from kas
// went out, is a shutdown for the agent too: it waits its reconnect jitter instead of reconnecting at
// once (all of a stopping kas's agents at the same instant).
func TestShutdownBeforeHeldCallEndIsAShutdown(t *testing.T) {
	a := startAgentOn(t, shutdownBeforeHeldEnd{}, Config{MinIdle: 1, ShutdownReconnectJitter: time.Hour})
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.pool.mu.Lock()
		waiting := !a.pool.reconnectAt.IsZero()
		a.pool.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent never took the tunnel's end for kas's shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
