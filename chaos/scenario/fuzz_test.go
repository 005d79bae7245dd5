package scenario

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: the loader never panics, and returns either a consistent scenario or errors that all
// name the file. Seeds: testdata/fuzz/FuzzParse (broken and odd files) and the shipped scenarios.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(shippedDir, "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatal("a scenario and an error")
			}
			checkNamesFile(t, err, "fuzz.yaml")
			return
		}
		checkConsistent(t, s)
	})
}

// checkConsistent checks what every loaded scenario guarantees to the runner.
func checkConsistent(t *testing.T, s *Scenario) {
	t.Helper()
	tp, l := s.Topology, s.Load
	switch {
	case s.File != "fuzz.yaml" || !nameRE.MatchString(s.Name):
		t.Fatalf("file %q, name %q", s.File, s.Name)
	case tp.Kas < 1 || tp.Kas > MaxKas || tp.Agents < 1 || tp.Agents > MaxAgents || tp.TunnelsPerAgent < 1 || tp.FindTimeout <= 0 || tp.MaxConnectionAge < 0:
		t.Fatalf("topology %+v", tp)
	case tp.Tracker != TrackerMemory && tp.Tracker != TrackerRedis:
		t.Fatalf("tracker %q", tp.Tracker)
	case l.Duration <= 0 || l.Duration > MaxDuration || l.CallTimeout <= 0 || (l.Rate > 0) == (l.Workers > 0) || l.Payload < 0 || l.Payload > MaxPayload:
		t.Fatalf("load %+v", l)
	case l.Entry != EntryAll && (l.Entry < 0 || l.Entry >= tp.Kas):
		t.Fatalf("entry %d of %d kas", l.Entry, tp.Kas)
	case len(s.Expect) == 0:
		t.Fatal("no objectives")
	}
	for _, f := range s.Faults {
		if (f.Network == nil) == (f.Process == nil) || (f.Link == "") != (f.Network == nil) {
			t.Fatalf("fault %s: network %v, process %v", f, f.Network, f.Process)
		}
		if f.At < 0 || f.At >= l.Duration || f.End(l.Duration) > l.Duration || f.Deadline <= 0 {
			t.Fatalf("fault %s in a load of %s", f, l.Duration)
		}
		if err := f.Select.Validate(); err != nil {
			t.Fatalf("fault %s: %v", f, err)
		}
		if f.Process != nil {
			if _, err := f.Select.PickKas(tp.Kas); f.Process.Type() == "kill-kas" && err != nil {
				t.Fatalf("fault %s: %v", f, err)
			}
		}
	}
	for _, o := range s.Expect {
		if o.Op == "" || o.Metric == "" || o.Threshold < 0 || o.Line < 1 {
			t.Fatalf("objective %+v", o)
		}
	}
}
