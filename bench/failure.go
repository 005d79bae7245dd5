package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DefaultMaxErrorRate is the share of failed calls a case tolerates: none. A benchmark of calls that
// fail measures the failure, not the tunnel.
const DefaultMaxErrorRate = 0

// tooManyErrors is the rule that fails a case (or a scale step): more than maxRate of its calls failed,
// or no call finished at all.
func tooManyErrors(calls, errors int64, maxRate float64) bool {
	return calls == 0 || float64(errors) > maxRate*float64(calls)
}

func (s *Summary) maxErrorRate() float64 {
	if s.Settings == nil {
		return DefaultMaxErrorRate
	}
	return s.Settings.MaxErrorRate
}

// failureText says why a failed case failed: "159480 of 159480 calls failed (Unavailable 159480)".
func (c *CaseResult) failureText() string {
	if c.Calls == 0 {
		return "no call finished"
	}
	return fmt.Sprintf("%d of %d calls failed (%s)", c.Errors, c.Calls, c.errorsByCodeText())
}

// errorsByCodeText lists the errors by code, the most frequent first: "Unavailable 12, Internal 1";
// "-" without errors.
func (c *CaseResult) errorsByCodeText() string {
	if len(c.ErrorsByCode) == 0 {
		if c.Errors > 0 {
			return fmt.Sprintf("%d without a code", c.Errors)
		}
		return "-"
	}
	codes := slices.SortedFunc(maps.Keys(c.ErrorsByCode), func(a, b string) int {
		return cmp.Or(cmp.Compare(c.ErrorsByCode[b], c.ErrorsByCode[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(codes))
	for i, code := range codes {
		parts[i] = fmt.Sprintf("%s %d", code, c.ErrorsByCode[code])
	}
	return strings.Join(parts, ", ")
}
