package httptunnel

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   int64
		rest string
		ok   bool
		err  bool
	}{
		{"/agents/1/", 1, "/", true, false},
		{"/agents/1", 1, "/", true, false},
		{"/agents/42/a/b%2Fc/", 42, "/a/b%2Fc/", true, false},
		{"/agents/-3/x", -3, "/x", true, false},
		{"/agents/x/", 0, "", true, true},
		{"/agents/+1/", 0, "", true, true},
		{"/agents/01/", 0, "", true, true},
		{"/agents/-0/", 0, "", true, true},
		{"/agents//x", 0, "", true, true},
		{"/agents/", 0, "", true, true},
		{"/agentsx/1/", 0, "", false, false},
		{"/", 0, "", false, false},
	} {
		id, rest, ok, err := ParsePath(tc.in)
		if id != tc.id || rest != tc.rest || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("ParsePath(%q) = %d, %q, %v, %v", tc.in, id, rest, ok, err)
		}
	}
}

// FuzzParsePath: for any path, either it is not ours, or it is rejected with an error, or the agent id
// round-trips and the rest is a path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/agents/1/", "/agents/1", "/agents/x/y", "/agents/", "/other", "/agents/9223372036854775808/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		id, rest, ok, err := ParsePath(p)
		switch {
		case !ok:
			if strings.HasPrefix(p, PathPrefix) || err != nil {
				t.Fatalf("%q: not ours, err %v", p, err)
			}
		case err != nil:
			if strings.Contains(err.Error(), "\n") && !strings.Contains(p, "\n") {
				t.Fatalf("%q: multi-line error %v", p, err)
			}
		default:
			if !strings.HasPrefix(rest, "/") {
				t.Fatalf("%q: rest %q", p, rest)
			}
			want := PathPrefix + strconv.FormatInt(id, 10)
			if p != want+rest && !(p == want && rest == "/") {
				t.Fatalf("%q: id %d, rest %q", p, id, rest)
			}
		}
	})
}

func TestUpstreamTarget(t *testing.T) {
	for _, tc := range []struct {
		base, path, query, want string
	}{
		{"http://up:8080", "/", "", "http://up:8080/"},
		{"http://up:8080/", "/a/b", "q=1", "http://up:8080/a/b?q=1"},
		{"http://up:8080/base", "/a%2Fb/", "", "http://up:8080/base/a%2Fb/"},
		{"http://up:8080/base/?k=v", "/x", "q=1", "http://up:8080/base/x?k=v&q=1"},
		{"https://user:pw@up/base?k=v", "/x", "", "https://user:pw@up/base/x?k=v"},
	} {
		base, err := url.Parse(tc.base)
		if err != nil {
			t.Fatal(err)
		}
		u, err := NewUpstream(base)
		if err != nil {
			t.Fatal(err)
		}
		got, err := u.target(tc.path, tc.query)
		if err != nil || got.String() != tc.want {
			t.Errorf("%s + %s ? %s = %v, %v; want %s", tc.base, tc.path, tc.query, got, err, tc.want)
		}
	}
	for _, bad := range []string{"ftp://up/", "http:///nohost", "http://up/#frag"} {
		base, _ := url.Parse(bad)
		if _, err := NewUpstream(base); err == nil {
			t.Errorf("NewUpstream(%s) accepted it", bad)
		}
	}
	if _, err := NewUpstream(nil); err == nil {
		t.Error("NewUpstream(nil) accepted it")
	}
}

func TestCleanHeader(t *testing.T) {
	h := http.Header{
		"Connection":        {"X-A, x-b", "close"},
		"X-A":               {"1"},
		"X-B":               {"2"},
		"X-C":               {"3"},
		"Keep-Alive":        {"timeout=5"},
		"Te":                {"trailers"},
		"Transfer-Encoding": {"chunked"},
		"Upgrade":           {"websocket"},
		"Content-Length":    {"10"},
		"Authorization":     {"Bearer x"},
	}
	got := cleanHeader(h, "X-C")
	if len(got) != 1 || got.Get("Authorization") != "Bearer x" {
		t.Errorf("cleanHeader = %v, want only Authorization", got)
	}
	if len(h) != 10 {
		t.Error("cleanHeader changed its input")
	}
}

func TestViaValue(t *testing.T) {
	for _, tc := range []struct {
		major, minor int
		want         string
	}{{1, 1, "1.1 kas"}, {1, 0, "1.0 kas"}, {2, 0, "2 kas"}, {3, 0, "3 kas"}, {0, 0, "1.1 kas"}} {
		if got := viaValue(tc.major, tc.minor, "kas"); got != tc.want {
			t.Errorf("viaValue(%d, %d) = %q, want %q", tc.major, tc.minor, got, tc.want)
		}
	}
}
