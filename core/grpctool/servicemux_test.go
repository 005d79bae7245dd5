package grpctool

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func muxCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestServiceMuxServesUnaryAndStreamingMethods(t *testing.T) {
	mux := NewServiceMux(nil, nil)
	healthpb.RegisterHealthServer(mux, health.NewServer())
	conn := NewInProcessConn(mux.Handle)
	defer conn.Wait()
	c := healthpb.NewHealthClient(conn)
	ctx := muxCtx(t)

	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v, want SERVING", resp, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v, want SERVING", first, err)
	}
	cancel()
	if _, err := w.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Watch after cancel: %v, want Canceled", err)
	}
}

func TestServiceMuxAnswersUnknownMethodsLikeGRPCServer(t *testing.T) {
	mux := NewServiceMux(nil, nil)
	healthpb.RegisterHealthServer(mux, health.NewServer())
	conn := NewInProcessConn(mux.Handle)
	defer conn.Wait()
	for method, want := range map[string]string{
		"/no.such.Service/Call":         "unknown service no.such.Service",
		"/grpc.health.v1.Health/NoSuch": "unknown method NoSuch for service grpc.health.v1.Health",
		"nonsense":                      "malformed method name",
	} {
		err := conn.Invoke(muxCtx(t), method, &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
		if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("%s: %v, want Unimplemented %q", method, err, want)
		}
	}
}

func TestServiceMuxUnaryCallWithoutRequestFails(t *testing.T) {
	mux := NewServiceMux(nil, nil)
	healthpb.RegisterHealthServer(mux, health.NewServer())
	conn := NewInProcessConn(mux.Handle)
	defer conn.Wait()
	cs, err := conn.NewStream(muxCtx(t), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, healthpb.Health_Check_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.CloseSend()
	if err := cs.RecvMsg(&healthpb.HealthCheckResponse{}); status.Code(err) != codes.Internal {
		t.Fatalf("unary call without a request: %v, want Internal", err)
	}
}

func TestServiceMuxRunsInterceptorsInOrder(t *testing.T) {
	var seen []string
	unary := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			seen = append(seen, name+" "+info.FullMethod)
			return h(ctx, req)
		}
	}
	stream := func(name string) grpc.StreamServerInterceptor {
		return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			seen = append(seen, name+" "+info.FullMethod)
			return h(srv, ss)
		}
	}
	mux := NewServiceMux([]grpc.UnaryServerInterceptor{unary("u1"), unary("u2")}, []grpc.StreamServerInterceptor{stream("s1"), stream("s2")})
	healthpb.RegisterHealthServer(mux, health.NewServer())
	conn := NewInProcessConn(mux.Handle)
	defer conn.Wait()
	c := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithCancel(muxCtx(t))
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	conn.Wait()
	want := []string{"u1 " + healthpb.Health_Check_FullMethodName, "u2 " + healthpb.Health_Check_FullMethodName,
		"s1 " + healthpb.Health_Watch_FullMethodName, "s2 " + healthpb.Health_Watch_FullMethodName}
	if !slices.Equal(seen, want) {
		t.Fatalf("interceptors ran as %q, want %q", seen, want)
	}
}

func TestServiceMuxServiceInfoAndDuplicates(t *testing.T) {
	mux := NewServiceMux(nil, nil)
	healthpb.RegisterHealthServer(mux, health.NewServer())
	info, ok := mux.GetServiceInfo()["grpc.health.v1.Health"]
	if !ok {
		t.Fatal("health service not listed")
	}
	var watch bool
	for _, m := range info.Methods {
		if m.Name == "Watch" {
			watch = m.IsServerStream && !m.IsClientStream
		}
	}
	if !watch {
		t.Fatalf("methods %+v: want Watch as a server stream", info.Methods)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a service twice did not panic, as grpc.Server does")
		}
	}()
	healthpb.RegisterHealthServer(mux, health.NewServer())
}

// TestServiceMuxesShareTablesNotServices: muxes that register the same description share its table,
// each serving its own implementation, and a service registered on one is unknown to another.
func TestServiceMuxesShareTablesNotServices(t *testing.T) {
	ctx := muxCtx(t)
	a, b, c := NewServiceMux(nil, nil), NewServiceMux(nil, nil), NewServiceMux(nil, nil)
	ha, hb := health.NewServer(), health.NewServer()
	hb.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(a, ha)
	healthpb.RegisterHealthServer(b, hb)
	if a.services[healthpb.Health_ServiceDesc.ServiceName].table != b.services[healthpb.Health_ServiceDesc.ServiceName].table {
		t.Error("two muxes built a table each for one description")
	}
	for _, tc := range []struct {
		mux  *ServiceMux
		want healthpb.HealthCheckResponse_ServingStatus
	}{{a, healthpb.HealthCheckResponse_SERVING}, {b, healthpb.HealthCheckResponse_NOT_SERVING}} {
		conn := NewInProcessConn(tc.mux.Handle)
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		conn.Wait()
		if err != nil || resp.GetStatus() != tc.want {
			t.Errorf("check: %v, %v; want %v", resp, err, tc.want)
		}
	}
	conn := NewInProcessConn(c.Handle)
	defer conn.Wait()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "unknown service") {
		t.Errorf("a mux without the service: %v", err)
	}
	if len(c.GetServiceInfo()) != 0 {
		t.Errorf("a mux without services lists %v", c.GetServiceInfo())
	}
}
