package limits

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	if err := (Limits{}).Validate(4 << 20); err != nil {
		t.Fatalf("zero limits (every one its default): %v", err)
	}
	if err := Default.Validate(4 << 20); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	err := Limits{MaxWaitingPerAgent: -1, MaxMetadataBytes: 2 << 10}.Validate(1 << 10)
	for _, want := range []string{"limits must not be negative", "the metadata limit (2048 bytes) must not be larger than the message limit (1024 bytes)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a negative limit and metadata above the message size: %v, want %q", err, want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(1 << 30); got != Default {
		t.Fatalf("zero limits: %+v, want the defaults %+v", got, Default)
	}
	got := Limits{MaxWaiting: 7, TunnelBurst: Default.TunnelBurst + 1}.WithDefaults(1 << 10)
	if got.MaxWaiting != 7 {
		t.Errorf("a set limit changed: %d, want 7", got.MaxWaiting)
	}
	// The metadata travels in one tunnel message: its default never exceeds the message size.
	if got.MaxMetadataBytes != 1<<10 {
		t.Errorf("metadata limit %d with 1 KiB messages, want 1024", got.MaxMetadataBytes)
	}
	if got.TunnelRate != Default.TunnelRate || got.TunnelBurst != Default.TunnelBurst+1 {
		t.Errorf("tunnel rate %v burst %d, want the default rate and the burst asked for", got.TunnelRate, got.TunnelBurst)
	}
	if err := got.Validate(1 << 10); err != nil {
		t.Errorf("limits with defaults do not validate: %v", err)
	}
}
