package httptunnel

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// checkPath reports why an escaped request path must not go to an upstream, or nil. The path is
// appended to the upstream's base path, so no segment may lead out of it or be read by the upstream as
// something other than it is here. Refused, each segment once percent-decoded:
//   - a dot segment, "." or "..", also before a ";" (servlet containers drop ";params", so "..;" is "..");
//   - an encoded slash (%2F): an upstream that decodes before it splits sees "..%2F" as "../";
//   - a backslash, raw or %5C: Windows servers and some frameworks take it for a slash;
//   - NUL (%00): an upstream written in C ends the path there, where nothing checked it.
//
// Such paths are refused, not cleaned: no client needs them, they are what traversal attempts look like,
// and cleaning would send the request somewhere other than asked without saying so.
//
// Decoding is done once, as the upstream does: "%252e%252e" is the name "%2e%2e", not "..". Neither kas
// nor the agent decodes twice, and an upstream that did would be open to every client, not only to those
// coming through the tunnel; refusing "%25" would refuse every path with a "%" in a name.
func checkPath(escapedPath string) error {
	for seg := range strings.SplitSeq(escapedPath, "/") {
		s, err := url.PathUnescape(seg)
		if err != nil {
			return fmt.Errorf("path segment %q: %w", truncate(seg, 64), err)
		}
		name, _, _ := strings.Cut(s, ";")
		switch {
		case name == "." || name == "..":
			return fmt.Errorf("path segment %q is a dot segment once percent-decoded", truncate(seg, 64))
		case strings.Contains(s, "/"):
			return fmt.Errorf("path segment %q has an encoded slash (%%2F)", truncate(seg, 64))
		case strings.Contains(s, `\`):
			return fmt.Errorf("path segment %q has a backslash", truncate(seg, 64))
		case strings.Contains(s, "\x00"):
			return fmt.Errorf("path segment %q has a NUL (%%00)", truncate(seg, 64))
		}
	}
	return nil
}

// underBase reports whether the decoded path p, cleaned as an upstream would resolve it (a backslash
// taken for a slash too), is the decoded base path or below it.
func underBase(p, base string) bool {
	clean := func(s string) string { return path.Clean("/" + strings.ReplaceAll(s, `\`, "/")) }
	p, base = clean(p), clean(base)
	return p == base || strings.HasPrefix(p, strings.TrimSuffix(base, "/")+"/")
}
