package grpctool

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServiceMux is a gRPC server without a transport: services register on it as on a grpc.Server, and
// Handle serves one call on any grpc.ServerStream, typically the server side of an InProcessConn.
// Together they are an in-memory server that costs a few channel operations per message where a
// grpc.Server behind bufconn costs two HTTP/2 transports and four goroutine hand-offs.
//
// Like grpc.Server it answers unknown services and methods with Unimplemented, runs the interceptors
// it was given around every handler, and serves GetServiceInfo, so that server reflection can be
// registered on it.
type ServiceMux struct {
	methods   map[string]muxMethod
	info      map[string]grpc.ServiceInfo
	unaryInt  grpc.UnaryServerInterceptor
	streamInt grpc.StreamServerInterceptor
}

type muxMethod struct {
	impl   any
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
}

var _ grpc.ServiceRegistrar = (*ServiceMux)(nil)

// NewServiceMux returns an empty mux. The interceptors run in the order given, the first outermost, as
// with grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor.
func NewServiceMux(unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) *ServiceMux {
	return &ServiceMux{
		methods:   make(map[string]muxMethod),
		info:      make(map[string]grpc.ServiceInfo),
		unaryInt:  chainUnary(unary),
		streamInt: chainStream(stream),
	}
}

// RegisterService implements grpc.ServiceRegistrar. Register everything before the first call: the
// mux is not safe for registration concurrent with calls. As grpc.Server does, it panics when impl
// does not implement the service or the service is registered twice: both are programming errors.
func (m *ServiceMux) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil && desc.HandlerType != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if st := reflect.TypeOf(impl); !st.Implements(ht) {
			panic(fmt.Sprintf("grpctool: ServiceMux.RegisterService found the handler of type %v that does not satisfy %v", st, ht))
		}
	}
	if _, ok := m.info[desc.ServiceName]; ok {
		panic(fmt.Sprintf("grpctool: ServiceMux.RegisterService found duplicate service registration for %q", desc.ServiceName))
	}
	info := grpc.ServiceInfo{Metadata: desc.Metadata}
	for i := range desc.Methods {
		md := &desc.Methods[i]
		m.methods["/"+desc.ServiceName+"/"+md.MethodName] = muxMethod{impl: impl, unary: md.Handler}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: md.MethodName})
	}
	for i := range desc.Streams {
		sd := &desc.Streams[i]
		m.methods["/"+desc.ServiceName+"/"+sd.StreamName] = muxMethod{impl: impl, stream: sd}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: sd.StreamName, IsClientStream: sd.ClientStreams, IsServerStream: sd.ServerStreams})
	}
	sort.Slice(info.Methods, func(i, j int) bool { return info.Methods[i].Name < info.Methods[j].Name })
	m.info[desc.ServiceName] = info
}

// GetServiceInfo returns the registered services, as grpc.Server.GetServiceInfo does.
func (m *ServiceMux) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo, len(m.info))
	for k, v := range m.info {
		out[k] = v
	}
	return out
}

// AnswersOnce reports whether method is registered and answers with one message: a unary or a
// client-streaming method. Such an answer can wait for the handler's return to leave in one piece: the
// caller can do nothing with a part of it.
func (m *ServiceMux) AnswersOnce(method string) bool {
	mm, ok := m.methods[method]
	return ok && (mm.unary != nil || mm.stream != nil && !mm.stream.ServerStreams)
}

// Handle serves the call on ss: its method comes from the stream's context (grpc.MethodFromServerStream).
// It has the signature of grpc.StreamHandler.
func (m *ServiceMux) Handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "service mux: the stream does not carry its method name")
	}
	mm, ok := m.methods[method]
	if !ok {
		service, name, err := SplitMethod(method)
		if err != nil {
			return status.Errorf(codes.Unimplemented, "malformed method name: %q", method)
		}
		if _, ok := m.info[service]; !ok {
			return status.Errorf(codes.Unimplemented, "unknown service %v", service)
		}
		return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", name, service)
	}
	if mm.stream != nil {
		if m.streamInt == nil {
			return mm.stream.Handler(mm.impl, ss)
		}
		info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: mm.stream.ClientStreams, IsServerStream: mm.stream.ServerStreams}
		return m.streamInt(mm.impl, ss, info, mm.stream.Handler)
	}
	// A unary call: exactly one request, then the reply. grpc.Server answers a missing request the same way.
	dec := func(req any) error {
		if err := ss.RecvMsg(req); err != nil {
			if err == io.EOF {
				return status.Error(codes.Internal, "grpc: a unary call ended without a request message")
			}
			return err
		}
		return nil
	}
	reply, err := mm.unary(mm.impl, ss.Context(), dec, m.unaryInt)
	if err != nil {
		return err
	}
	return ss.SendMsg(reply)
}

func chainUnary(ints []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	if len(ints) == 0 {
		return nil
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return ints[0](ctx, req, info, unaryNext(ints[1:], info, handler))
	}
}

func unaryNext(ints []grpc.UnaryServerInterceptor, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) grpc.UnaryHandler {
	if len(ints) == 0 {
		return handler
	}
	return func(ctx context.Context, req any) (any, error) {
		return ints[0](ctx, req, info, unaryNext(ints[1:], info, handler))
	}
}

func chainStream(ints []grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	if len(ints) == 0 {
		return nil
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return ints[0](srv, ss, info, streamNext(ints[1:], info, handler))
	}
}

func streamNext(ints []grpc.StreamServerInterceptor, info *grpc.StreamServerInfo, handler grpc.StreamHandler) grpc.StreamHandler {
	if len(ints) == 0 {
		return handler
	}
	return func(srv any, ss grpc.ServerStream) error {
		return ints[0](srv, ss, info, streamNext(ints[1:], info, handler))
	}
}
