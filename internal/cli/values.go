package cli

import (
	"fmt"
	"strings"
)

// KeyValues is a repeatable KEY=VALUE flag.
type KeyValues struct {
	// What the flag holds, for messages: "ID=TOKEN", "SERVICE=ADDR".
	Form  string
	Pairs [][2]string
}

func (kv *KeyValues) String() string {
	if kv == nil {
		return ""
	}
	parts := make([]string, 0, len(kv.Pairs))
	for _, p := range kv.Pairs {
		parts = append(parts, p[0]+"=...")
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (kv *KeyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want %s, got %q", kv.Form, redact(s))
	}
	kv.Pairs = append(kv.Pairs, [2]string{k, v})
	return nil
}

// redact keeps the part before "=" of a value that may hold a secret.
func redact(s string) string {
	if k, _, ok := strings.Cut(s, "="); ok {
		return k + "=..."
	}
	if len(s) > 3 {
		return s[:3] + "..."
	}
	return s
}
