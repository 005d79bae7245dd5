package result

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// TestHistogramRoundTrip: a histogram as load records them (1 µs to 5 min, 3 digits) comes back with
// every count, in a few kilobytes.
func TestHistogramRoundTrip(t *testing.T) {
	h := hdrhistogram.New(1, 300_000_000, 3)
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		_ = h.RecordValue(20 + int64(r.ExpFloat64()*80))
	}
	_ = h.RecordValue(2_000_000)
	s, err := EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) > 8<<10 {
		t.Errorf("encoded histogram is %d bytes", len(s))
	}
	got, err := DecodeHistogram(s)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equals(h) {
		t.Errorf("decoded histogram differs: %d samples, p99 %d; want %d, %d", got.TotalCount(), got.ValueAtQuantile(99), h.TotalCount(), h.ValueAtQuantile(99))
	}
	for _, bad := range []string{"", "not base64!", "AAAA", strings.Repeat("HISTFAAAA", 3)} {
		if _, err := DecodeHistogram(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
