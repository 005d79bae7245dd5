package httptunnel_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests.
const testTimeout = 20 * time.Second

// fixture is a real kas with its HTTP listener and one agent (id 1) whose HTTP upstream is an
// httptest server, all on loopback.
type fixture struct {
	env      *testenv.Env
	upstream *httptest.Server
	// kasURL is the base of kas's HTTP listener: "http://127.0.0.1:port".
	kasURL string
	// h1 speaks HTTP/1.1 only, h2c HTTP/2 without TLS only.
	h1, h2c *http.Client
}

type fixtureConfig struct {
	// upstreamURL overrides the agent's upstream (default: the httptest server).
	upstreamURL string
	// upstreamPath is the base path of the agent's upstream on the httptest server.
	upstreamPath string
	// register replaces the HTTP upstream on the agent.
	register    func(a *tunclient.Agent)
	findTimeout time.Duration
	// agents is the number of agents; only agent 1 serves HTTP.
	agents int
}

func start(t *testing.T, upstream http.Handler, cfg fixtureConfig) *fixture {
	t.Helper()
	f := &fixture{}
	if upstream == nil {
		upstream = http.NotFoundHandler()
	}
	f.upstream = httptest.NewServer(upstream)
	t.Cleanup(f.upstream.Close)
	upURL := f.upstream.URL + cfg.upstreamPath
	if cfg.upstreamURL != "" {
		upURL = cfg.upstreamURL
	}
	u, err := url.Parse(upURL)
	if err != nil {
		t.Fatal(err)
	}
	f.env = testenv.Start(t, testenv.Options{
		Agents: cfg.agents,
		Kas: func(c *kas.Config) {
			if cfg.findTimeout > 0 {
				c.FindTimeout = cfg.findTimeout
			}
		},
		Register: func(id int64, a *tunclient.Agent) {
			if id != 1 {
				return
			}
			if cfg.register != nil {
				cfg.register(a)
				return
			}
			up, err := httptunnel.Register(a, u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(up.Close) // runs after the agent stopped
		},
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptunnel.NewServer(httptunnel.NewHandler(f.env.Kas.InternalConn()), "")
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	f.kasURL = "http://" + l.Addr().String()

	f.h1 = &http.Client{Transport: &http.Transport{DisableCompression: true}}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	f.h2c = &http.Client{Transport: &http.Transport{DisableCompression: true, Protocols: &h2c}}
	t.Cleanup(func() {
		f.h1.CloseIdleConnections()
		f.h2c.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("http shutdown: %v", err)
		}
		_ = srv.Close()
		<-served
	})
	return f
}

// clients are the two protocols kas serves, by name.
func (f *fixture) clients() map[string]*http.Client {
	return map[string]*http.Client{"HTTP/1.1": f.h1, "h2c": f.h2c}
}

// url is the kas URL that reaches path on agent 1's upstream.
func (f *fixture) url(path string) string {
	return f.kasURL + "/agents/1" + path
}

// ctx is a context bounded by testTimeout, cancelled when the test ends.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// wait waits for ch, failing the test after testTimeout.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
