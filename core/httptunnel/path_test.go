package httptunnel

import (
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
		{"/agents/42/a/b%41c/", 42, "/a/b%41c/", true, false},
		{"/agents/42/a/b%2Fc/", 0, "", true, true}, // an encoded slash: see TestParsePathRefusesTraversal
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

// TraversalForms are request paths, as a client may send them after "/agents/{id}" (curl
// --path-as-is), that could lead out of the upstream's base path, with what the refusal must say. It is
// exported for the tunnel test in package httptunnel_test.
var TraversalForms = []struct{ Path, Says string }{
	{"/../secret", "dot segment"},
	{"/%2e%2e/secret", "dot segment"},
	{"/%2E%2E/secret", "dot segment"},
	{"/.%2e/secret", "dot segment"},
	{"/%2e./", "dot segment"},
	{"/a/../../secret", "dot segment"},
	{"/./x", "dot segment"},
	{"/%2e/x", "dot segment"},
	{"/a/..", "dot segment"},
	{"/..", "dot segment"}, // "/agents/1/.."
	{"/.", "dot segment"},
	{"/..;/secret", "dot segment"}, // servlet containers drop ";params"
	{"/%2e%2e;x/secret", "dot segment"},
	{"/..%2fsecret", "encoded slash"},
	{"/..%2Fsecret", "encoded slash"},
	{"/%2e%2e%2fsecret", "encoded slash"},
	{"/a%2fb", "encoded slash"},
	{`/..\secret`, "backslash"},
	{"/..%5csecret", "backslash"},
	{"/..%5Csecret", "backslash"},
	{"/a%00b", "NUL"},
}

// LegitForms are request paths that look close to a traversal but are not one: they must reach the
// upstream as sent. "%252e%252e" is the name "%2e%2e": only an upstream that decoded twice would take
// it for "..", and neither kas nor the agent does.
var LegitForms = []string{"/a/b.c/", "/..foo/", "/foo../", "/a%20b", "/.well-known/x", "/%252e%252e/secret", "/a;b/c", "//x"}

func TestParsePathRefusesTraversal(t *testing.T) {
	for _, tc := range TraversalForms {
		id, rest, ok, err := ParsePath("/agents/1" + tc.Path)
		if !ok || err == nil || !strings.Contains(err.Error(), tc.Says) || id != 0 || rest != "" {
			t.Errorf("ParsePath(/agents/1%s) = %d, %q, %v, %v; want an error saying %q", tc.Path, id, rest, ok, err, tc.Says)
		}
	}
	for _, p := range LegitForms {
		if id, rest, ok, err := ParsePath("/agents/1" + p); id != 1 || rest != p || !ok || err != nil {
			t.Errorf("ParsePath(/agents/1%s) = %d, %q, %v, %v; want it accepted", p, id, rest, ok, err)
		}
	}
	if _, _, _, err := ParsePath("/agents/1/a%zz"); err == nil || !strings.Contains(err.Error(), `invalid URL escape "%zz"`) {
		t.Errorf("ParsePath with a bad escape: %v", err)
	}
}

// FuzzParsePath: for any path, either it is not ours, or it is rejected with an error, or the agent id
// round-trips and the rest is a path that stays under the upstream's base path: once decoded it has no
// dot segment, and it has no encoded slash or backslash.
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
			lower := strings.ToLower(rest)
			if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(rest, `\`) {
				t.Fatalf("%q: accepted rest %q has an encoded slash or a backslash", p, rest)
			}
			decoded, err := url.PathUnescape(rest)
			if err != nil {
				t.Fatalf("%q: accepted rest %q does not decode: %v", p, rest, err)
			}
			for seg := range strings.SplitSeq(decoded, "/") {
				if seg == "." || seg == ".." || strings.HasPrefix(seg, ".;") || strings.HasPrefix(seg, "..;") {
					t.Fatalf("%q: accepted rest %q has a dot segment once decoded", p, rest)
				}
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
		{"http://up:8080/base", "/a%41b/", "", "http://up:8080/base/a%41b/"},
		{"http://up:8080/base", "/%252e%252e/x", "", "http://up:8080/base/%252e%252e/x"},
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

// An old or hostile kas may send any path: the agent refuses itself what could lead out of the base.
func TestUpstreamTargetRefusesTraversal(t *testing.T) {
	base, _ := url.Parse("http://up/base/")
	u, err := NewUpstream(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range TraversalForms {
		if got, err := u.target(tc.Path, ""); err == nil || !strings.Contains(err.Error(), tc.Says) {
			t.Errorf("target(%q) = %v, %v; want an error saying %q", tc.Path, got, err, tc.Says)
		}
	}
	for _, p := range LegitForms {
		if got, err := u.target(p, ""); err != nil || got.EscapedPath() != "/base"+p || !strings.HasPrefix(got.Path, "/base/") {
			t.Errorf("target(%q) = %v, %v; want /base%s", p, got, err, p)
		}
	}
	// A path from kas is checked whole, "/agents/{id}" is kas's.
	if _, err := u.target("/a/%2e%2e/%2e%2e/secret", ""); err == nil {
		t.Error("target accepted a path that climbs two levels")
	}
}

func TestUnderBase(t *testing.T) {
	for _, tc := range []struct {
		p, base string
		want    bool
	}{
		{"/base/x", "/base/", true},
		{"/base/", "/base/", true},
		{"/base", "/base/", true},
		{"/base/a/../b", "/base", true},
		{"/base//x", "/base", true},
		{"/x", "", true},
		{"/../x", "/", true}, // nothing is above the root
		{"/base/../secret", "/base/", false},
		{"/base/a/../../secret", "/base/", false},
		{`/base/..\secret`, "/base/", false},
		{"/basement", "/base", false},
		{"/base/..", "/base", false},
		{"/", "/base", false},
	} {
		if got := underBase(tc.p, tc.base); got != tc.want {
			t.Errorf("underBase(%q, %q) = %v, want %v", tc.p, tc.base, got, tc.want)
		}
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
