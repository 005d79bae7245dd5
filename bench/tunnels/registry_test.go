package tunnels

import (
	"slices"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "all", want: All()},
		{in: " tunnel , direct", want: []string{Reuse, Direct}},
		{in: "tunnel-single-use", want: []string{SingleUse}},
		{in: "", wantErr: "empty list of tunnels"},
		{in: "tunnel,tunnel", wantErr: `tunnel "tunnel" listed twice`},
		{in: "tunnel,all", wantErr: "all stands alone"},
		{in: "tunnel,", wantErr: `unknown tunnel ""`},
		{in: "Tunnel", wantErr: `unknown tunnel "Tunnel"`},
	} {
		got, err := ParseList(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseList(%q) = %v, %v; want error %q", tc.in, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("ParseList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestDefaultAndAll(t *testing.T) {
	if got, want := Default(), []string{Reuse, SingleUse, GRPCProxy}; !slices.Equal(got, want) {
		t.Errorf("Default() = %v, want this project's modes and the references %v", got, want)
	}
	all := All()
	if !slices.Contains(all, Reuse) || !slices.Contains(all, JhumpGrpctunnel) || !slices.Contains(all, GRPCProxy) || slices.Contains(all, Direct) {
		t.Errorf("All() = %v: want this project's modes, the peers and the references, not the baseline", all)
	}
	for i, r := range Registered() {
		if r.About == "" {
			t.Errorf("adapter %s says nothing About itself", r.Name)
		}
		if i > 0 && Registered()[i-1].Kind > r.Kind {
			t.Errorf("Registered() is not ordered by kind at %s", r.Name)
		}
	}
}

func TestRegisterRefuses(t *testing.T) {
	for _, r := range []Registration{
		{Name: Direct, Adapter: StartFunc(startDirect)},
		{Name: "all", Adapter: StartFunc(startDirect)},
		{Name: "Bad Name", Adapter: StartFunc(startDirect)},
		{Name: "nil-adapter"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not refuse", r.Name)
				}
			}()
			Register(r)
		}()
	}
}

// FuzzParseList: any --tunnels value gives registered names, each once, or a one-line error.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"all", "tunnel,direct", "", ",", "tunnel,,tunnel", "all,all", " tunnel-single-use "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ParseList(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseList(%q): error of several lines: %q", s, err)
			}
			return
		}
		if len(names) == 0 {
			t.Errorf("ParseList(%q): no names and no error", s)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if _, err := Lookup(n); err != nil || seen[n] {
				t.Errorf("ParseList(%q) = %v: %q unregistered or repeated", s, names, n)
			}
			seen[n] = true
		}
	})
}
