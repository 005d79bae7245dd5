package bench

import (
	"fmt"
	"strings"
)

// FormatBytes writes sizes the way case names use them: 64B, 1KiB, 1MiB.
func FormatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// ParseBytes parses 64, 64B, 1KiB, 1MiB (case-insensitive, K/M accepted for KiB/MiB).
func ParseBytes(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"mib", 1 << 20}, {"kib", 1 << 10}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSuffix(t, suf.s), suf.m
			break
		}
	}
	var n int
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 64, 1KiB or 1MiB", s)
	}
	return n * mult, nil
}
