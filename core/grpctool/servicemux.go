package grpctool

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"sort"
	"sync"

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
	services  map[string]muxService
	unaryInt  grpc.UnaryServerInterceptor
	streamInt grpc.StreamServerInterceptor
}

// muxService is a registered service: its implementation and its description's table.
type muxService struct {
	impl  any
	table *serviceTable
}

// serviceTable is what a service description gives every mux that registers it: its methods by name
// and its grpc.ServiceInfo. Agents register the same descriptions (the generated code's variables), so
// a process builds each table once and its agents share it: an idle agent holds a small map of its
// services, not a method table and info of its own (about 1.5 KiB per agent with the demo, health and
// reflection services).
type serviceTable struct {
	methods map[string]muxMethod
	info    grpc.ServiceInfo
}

type muxMethod struct {
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
}

// serviceTables holds the table of every service description registered in this process, by its
// address: generated descriptions are package variables, so there are as many as the program has.
var serviceTables sync.Map // *grpc.ServiceDesc → *serviceTable

func tableOf(desc *grpc.ServiceDesc) *serviceTable {
	if t, ok := serviceTables.Load(desc); ok {
		return t.(*serviceTable)
	}
	t := &serviceTable{methods: make(map[string]muxMethod, len(desc.Methods)+len(desc.Streams)), info: grpc.ServiceInfo{Metadata: desc.Metadata}}
	for i := range desc.Methods {
		md := &desc.Methods[i]
		t.methods[md.MethodName] = muxMethod{unary: md.Handler}
		t.info.Methods = append(t.info.Methods, grpc.MethodInfo{Name: md.MethodName})
	}
	for i := range desc.Streams {
		sd := &desc.Streams[i]
		t.methods[sd.StreamName] = muxMethod{stream: sd}
		t.info.Methods = append(t.info.Methods, grpc.MethodInfo{Name: sd.StreamName, IsClientStream: sd.ClientStreams, IsServerStream: sd.ServerStreams})
	}
	sort.Slice(t.info.Methods, func(i, j int) bool { return t.info.Methods[i].Name < t.info.Methods[j].Name })
	actual, _ := serviceTables.LoadOrStore(desc, t)
	return actual.(*serviceTable)
}

var _ grpc.ServiceRegistrar = (*ServiceMux)(nil)

// NewServiceMux returns an empty mux. The interceptors run in the order given, the first outermost, as
// with grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor.
func NewServiceMux(unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) *ServiceMux {
	return &ServiceMux{
		services:  make(map[string]muxService),
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
	if _, ok := m.services[desc.ServiceName]; ok {
		panic(fmt.Sprintf("grpctool: ServiceMux.RegisterService found duplicate service registration for %q", desc.ServiceName))
	}
	m.services[desc.ServiceName] = muxService{impl: impl, table: tableOf(desc)}
}

// GetServiceInfo returns the registered services, as grpc.Server.GetServiceInfo does. The method
// lists are shared by every mux that registered the service: read them, do not change them.
func (m *ServiceMux) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo, len(m.services))
	for k, v := range m.services {
		out[k] = v.table.info
	}
	return out
}

// lookup finds method's service and handler.
func (m *ServiceMux) lookup(method string) (muxService, muxMethod, bool) {
	service, name, err := SplitMethod(method)
	if err != nil {
		return muxService{}, muxMethod{}, false
	}
	svc, ok := m.services[service]
	if !ok {
		return muxService{}, muxMethod{}, false
	}
	mm, ok := svc.table.methods[name]
	return svc, mm, ok
}

// AnswersOnce reports whether method is registered and answers with one message: a unary or a
// client-streaming method. Such an answer can wait for the handler's return to leave in one piece: the
// caller can do nothing with a part of it.
func (m *ServiceMux) AnswersOnce(method string) bool {
	_, mm, ok := m.lookup(method)
	return ok && (mm.unary != nil || mm.stream != nil && !mm.stream.ServerStreams)
}

// Handle serves the call on ss: its method comes from the stream's context (grpc.MethodFromServerStream).
// It has the signature of grpc.StreamHandler.
func (m *ServiceMux) Handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "service mux: the stream does not carry its method name")
	}
	svc, mm, ok := m.lookup(method)
	if !ok {
		service, name, err := SplitMethod(method)
		if err != nil {
			return status.Errorf(codes.Unimplemented, "malformed method name: %q", method)
		}
		if _, ok := m.services[service]; !ok {
			return status.Errorf(codes.Unimplemented, "unknown service %v", service)
		}
		return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", name, service)
	}
	if mm.stream != nil {
		if m.streamInt == nil {
			return mm.stream.Handler(svc.impl, ss)
		}
		info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: mm.stream.ClientStreams, IsServerStream: mm.stream.ServerStreams}
		return m.streamInt(svc.impl, ss, info, mm.stream.Handler)
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
	reply, err := mm.unary(svc.impl, ss.Context(), dec, m.unaryInt)
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
