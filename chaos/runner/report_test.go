package runner

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// testChaosSummary reads testdata/summary.json: kas-kill over 40 s, one kas killed at 10 s, calls
// failing for about 3 s after, recovery 3.0 s, and the failed-calls objective missed.
func testChaosSummary(t *testing.T) *Summary {
	t.Helper()
	s, err := ReadSummary(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// passedSummary is the fixture turned into a clean run: every objective met, no fault, no failure.
func passedSummary(t *testing.T) *Summary {
	s := testChaosSummary(t)
	s.Scenario, s.Passed, s.RecoveryS, s.Faults = "baseline", true, nil, nil
	for i := range s.Objectives {
		s.Objectives[i].OK = true
	}
	s.Calls.OK, s.Calls.FailedByCode = s.Calls.Sent, nil
	return s
}

// minimalSummaries have nothing to report: the zero Summary, and one with a name, no faults, no
// timeline and no routing.
func minimalSummaries() map[string]*Summary {
	return map[string]*Summary{
		"zero":    {},
		"minimal": {Schema: SummarySchema, Scenario: "empty", Passed: true, Calls: Calls{Sent: 10, OK: 10}},
	}
}

// TestFixtureConsistent: the hand-written fixture adds up (Sent = OK + failed, the timeline sums to
// the totals, the histogram to its seconds) and round-trips through JSON byte for byte, so the
// goldens are drawn from a run that could have happened and a changed schema field fails here.
func TestFixtureConsistent(t *testing.T) {
	s := testChaosSummary(t)
	if got := s.Calls.OK + reportFailedTotal(s.Calls.FailedByCode); got != s.Calls.Sent {
		t.Errorf("ok + failed = %d, sent %d", got, s.Calls.Sent)
	}
	var offered, achieved, ok, offeredFailed int64
	failed := map[string]int64{}
	buckets := make([]uint64, len(s.Routing.BucketCounts))
	for _, sec := range s.Timeline {
		offered, achieved, ok = offered+sec.Offered, achieved+sec.Achieved+sec.Failed, ok+sec.OK
		offeredFailed += sec.OfferedFailed
		if sec.OK != sec.Achieved || sec.Failed != reportFailedTotal(sec.ByCode) {
			t.Errorf("second %d: achieved %d, ok %d, failed %d, by code %v", sec.T, sec.Achieved, sec.OK, sec.Failed, sec.ByCode)
		}
		for c, n := range sec.ByCode {
			failed[c] += n
		}
		for i, n := range sec.RoutingCounts {
			buckets[i] += n
		}
	}
	if offered != s.Calls.Sent || achieved != s.Calls.Sent || ok != s.Calls.OK || offeredFailed != s.Calls.Sent-s.Calls.OK {
		t.Errorf("timeline: offered %d, finished %d, ok %d, offered and failed %d; calls: sent %d, ok %d", offered, achieved, ok, offeredFailed, s.Calls.Sent, s.Calls.OK)
	}
	windows := slices.Clone(s.Faults)
	r, notRecovered := recoveries(s.Timeline, windows, float64(len(s.Timeline)))
	if r == nil || s.RecoveryS == nil || *r != *s.RecoveryS || len(notRecovered) > 0 || !reflect.DeepEqual(windows, s.Faults) {
		t.Errorf("recovery of the timeline %v (%v), the fixture says %v (%v)", r, windows, s.RecoveryS, s.Faults)
	}
	for c, n := range s.Calls.FailedByCode {
		if failed[c] != n {
			t.Errorf("%s: %d failed in the timeline, %d in calls", c, failed[c], n)
		}
	}
	for i := range buckets {
		if buckets[i] != s.Routing.BucketCounts[i] {
			t.Errorf("routing bucket %d: timeline %d, run %d", i, buckets[i], s.Routing.BucketCounts[i])
		}
	}
	want, err := os.ReadFile(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Error("testdata/summary.json does not round-trip through Summary")
	}
}

func TestWriteMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, testChaosSummary(t)); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "report.golden.md", b.Bytes())
	first, _, _ := strings.Cut(b.String(), "\n")
	if !strings.HasPrefix(first, "# kas-kill — FAILED: missed failed_calls") || !strings.Contains(first, "failed_calls") {
		t.Errorf("first line %q does not say plainly that the run failed and why", first)
	}
}

func TestWriteTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, testChaosSummary(t)); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "text.golden.txt", b.Bytes())
}

// TestWriteChaosIndexGolden: a passed run, the failed fixture, and a run that failed on its own.
func TestWriteChaosIndexGolden(t *testing.T) {
	broken := passedSummary(t)
	broken.Scenario, broken.Passed, broken.Failure = "redis-outage", false, "stop-redis: redis did not stop within 10s"
	var b bytes.Buffer
	if err := WriteChaosIndex(&b, []*Summary{passedSummary(t), testChaosSummary(t), broken}); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "index.golden.md", b.Bytes())
	if err := WriteChaosIndex(&b, []*Summary{nil}); err == nil {
		t.Error("a nil summary was accepted")
	}
}

func TestVerdict(t *testing.T) {
	fixture := testChaosSummary(t)
	broken := passedSummary(t)
	broken.Passed, broken.Failure = false, "kill-kas: no kas 5"
	noReason := passedSummary(t)
	noReason.Passed = false
	for _, c := range []struct {
		name string
		s    *Summary
		want string
	}{
		{"passed", passedSummary(t), "PASSED: the tunnel held; 3 of 3 objectives met"},
		{"objective missed", fixture, "FAILED: missed failed_calls (want <= 3 (inflight_at_kill), got 412); 2 of 3 objectives met"},
		{"run failed", broken, "FAILED: the run failed: kill-kas: no kas 5; 3 of 3 objectives met"},
		{"no reason", noReason, "FAILED: 3 of 3 objectives met; no reason recorded"},
		{"zero", &Summary{}, "FAILED: no reason recorded"},
	} {
		if got := Verdict(c.s); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestWriteMinimal: summaries without faults, timeline, routing or objectives write every format
// without error and say what is missing.
func TestWriteMinimal(t *testing.T) {
	for name, s := range minimalSummaries() {
		t.Run(name, func(t *testing.T) {
			var md, text, index bytes.Buffer
			if err := WriteMarkdown(&md, s); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"No faults.", "No routing histogram was recorded.", "No timeline was recorded.", "The scenario sets no objectives."} {
				if !strings.Contains(md.String(), want) {
					t.Errorf("report.md lacks %q:\n%s", want, md.String())
				}
			}
			if err := WriteText(&text, s); err != nil {
				t.Fatal(err)
			}
			if err := WriteChaosIndex(&index, []*Summary{s}); err != nil {
				t.Fatal(err)
			}
			files, err := WritePlots(t.TempDir(), s)
			if err != nil || len(files) != 0 {
				t.Errorf("plots: wrote %v, %v; want nothing", files, err)
			}
		})
	}
	if err := WriteMarkdown(&bytes.Buffer{}, nil); err == nil {
		t.Error("markdown: nil summary accepted")
	}
	if err := WriteText(&bytes.Buffer{}, nil); err == nil {
		t.Error("text: nil summary accepted")
	}
}

// TestReportOddData: malformed or hostile values are written, not trusted: a pipe in a name does not
// break the table, a malformed histogram is named as such.
func TestReportOddData(t *testing.T) {
	s := testChaosSummary(t)
	s.Objectives[0].Name = "a|b\nc"
	s.Routing.BucketCounts = s.Routing.BucketCounts[:3]
	var b bytes.Buffer
	if err := WriteMarkdown(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `| a\|b c |`) {
		t.Error("a pipe or newline in an objective name was not escaped")
	}
	if !strings.Contains(b.String(), "The routing histogram is malformed: 8 bounds and 3 counts") {
		t.Error("a malformed histogram was not reported")
	}
}

func TestReportFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{reportMs(0), "0"}, {reportMs(85), "0.085"}, {reportMs(1120), "1.12"}, {reportMs(41000), "41.0"}, {reportMs(420000), "420"},
		{reportSeconds(2.1), "2.1 s"}, {reportSeconds(0.35), "350 ms"},
		{reportRatio(11588, 12000), "0.9657"}, {reportRatio(10, 10), "1.0000"}, {reportRatio(999999, 1000000), "0.999999"}, {reportRatio(1, 3), "0.3333"},
		{reportBucket([]float64{0.001, 0.004}, 0), "≤ 1ms"}, {reportBucket([]float64{0.001, 0.004}, 1), "1ms – 4ms"},
		{reportBucket([]float64{0.001, 4.096}, 2), "> 4.096s"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
