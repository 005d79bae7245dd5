package serverstream

import (
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Most calls answer with an empty header and trailer: those messages are built once. Protobuf messages
// are safe to marshal from several goroutines at once.
var (
	emptyHeaderMsg  = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{}}}
	emptyTrailerMsg = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{}}}
)

func headerMsg(md metadata.MD) *rpc.ConnectRequest {
	if len(md) == 0 {
		return emptyHeaderMsg
	}
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{Meta: rpc.MetaToValues(md)}}}
}

func trailerMsg(md metadata.MD) *rpc.ConnectRequest {
	if len(md) == 0 {
		return emptyTrailerMsg
	}
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{Meta: rpc.MetaToValues(md)}}}
}

// ErrorMsg is the tunnel message that ends a call with err's status (a context error or a plain error
// becomes one as status.Convert makes it).
func ErrorMsg(err error) *rpc.ConnectRequest {
	st := status.Convert(err).Proto()
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Error{Error: &rpc.Error{Status: st}}}
}

// tunnelPeer is what peer.FromContext tells a service about its caller: the call came through a tunnel
// from kas (the caller's own address stays with kas).
var tunnelPeer = &peer.Peer{Addr: tunnelAddr{}, LocalAddr: tunnelAddr{}}

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "tunnel" }
func (tunnelAddr) String() string  { return "kas" }
