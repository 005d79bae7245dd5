package chaos

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// paramReader reads Params and collects every problem. Each getter marks its key as known; done
// reports the keys nobody asked for.
type paramReader struct {
	p     Params
	known []string
	errs  []error
}

func readParams(p Params) *paramReader { return &paramReader{p: p} }

func (r *paramReader) fail(key string, format string, args ...any) {
	r.errs = append(r.errs, &ParamError{Key: key, Err: fmt.Errorf(format, args...)})
}

func (r *paramReader) value(key string) (string, bool) {
	r.known = append(r.known, key)
	v, ok := r.p[key]
	return strings.TrimSpace(v), ok
}

// duration reads a non-negative duration; required when def < 0. Toxiproxy counts whole
// milliseconds, so a finer duration is an error.
func (r *paramReader) duration(key string, def time.Duration) time.Duration {
	v, ok := r.value(key)
	if !ok {
		if def < 0 {
			r.fail(key, "required (a duration such as 100ms)")
			return 0
		}
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		r.fail(key, "bad duration %q (want e.g. 100ms or 2s)", v)
	case d < 0:
		r.fail(key, "must not be negative, got %s", v)
	case d%time.Millisecond != 0:
		r.fail(key, "%s is finer than toxiproxy's millisecond", v)
	default:
		return d
	}
	return 0
}

// positiveDuration is duration that must be above zero.
func (r *paramReader) positiveDuration(key string, def time.Duration) time.Duration {
	n := len(r.errs)
	d := r.duration(key, def)
	if d == 0 && len(r.errs) == n {
		r.fail(key, "must be above zero")
	}
	return d
}

func (r *paramReader) direction() Direction {
	v, ok := r.value("direction")
	if !ok {
		return DefaultDirection
	}
	d, err := ParseDirection(v)
	if err != nil {
		r.errs = append(r.errs, &ParamError{Key: "direction", Err: err})
	}
	return d
}

// bytes reads a positive size: 64, 64B, 16KiB, 1MiB.
func (r *paramReader) bytes(key string) int64 {
	v, ok := r.value(key)
	if !ok {
		r.fail(key, "required (a size such as 64KiB)")
		return 0
	}
	n, err := ParseSize(v)
	if err != nil {
		r.errs = append(r.errs, &ParamError{Key: key, Err: err})
	} else if n == 0 {
		r.fail(key, "must be above zero")
	}
	return n
}

// done returns every problem, unknown keys included (sorted, so that messages are stable).
func (r *paramReader) done() error {
	var unknown []string
	for k := range r.p {
		if !slices.Contains(r.known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		r.errs = append(r.errs, &ParamError{Key: k, Err: &unknownParamError{known: slices.Clone(r.known)}})
	}
	return errors.Join(r.errs...)
}

// unknownParamError is a param the fault type does not take; it knows the ones it does, so that
// ParamNames can ask a constructor for them.
type unknownParamError struct{ known []string }

func (e *unknownParamError) Error() string {
	if len(e.known) == 0 {
		return "unknown param (want no params)"
	}
	return "unknown param (want one of " + strings.Join(e.known, ", ") + ")"
}

// paramProbe is a param name no fault type takes.
const paramProbe = "\x00probe"

// FaultParams lists the params a network fault type takes, in the order its constructor reads them.
func FaultParams(typ string) ([]string, error) {
	c, err := faults.get(typ)
	if err != nil {
		return nil, err
	}
	_, err = c(Params{paramProbe: ""})
	return probedParams(typ, err)
}

// ProcessParams lists the params a process fault type takes, like FaultParams.
func ProcessParams(typ string) ([]string, error) {
	c, err := processes.get(typ)
	if err != nil {
		return nil, err
	}
	_, err = c(Params{paramProbe: ""})
	return probedParams(typ, err)
}

// probedParams finds, in what a constructor returned for the probe param, the params it knows.
func probedParams(typ string, err error) ([]string, error) {
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	for _, e := range list {
		var pe *ParamError
		var u *unknownParamError
		if errors.As(e, &pe) && pe.Key == paramProbe && errors.As(pe.Err, &u) {
			return slices.Clone(u.known), nil
		}
	}
	return nil, fmt.Errorf("%s: its constructor does not report unknown params (%v)", typ, err)
}

// ParseSize parses a byte size: 64, 64B, 16KiB, 1MiB (K/KB and M/MB are accepted for KiB and MiB).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"k", 1 << 10}, {"m", 1 << 20}, {"b", 1}} {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSuffix(t, suf.s), suf.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 64, 16KiB or 1MiB)", s)
	}
	return n * mult, nil
}
