package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Suggest returns the candidates a mistyped word most likely meant: the nearest ones by edit distance
// when they are near enough to be a typo, else the ones the word begins (an abbreviation: "redis") or
// ends after a '-' (a prefix left out: "ca-file" for "kas-ca-file"). Nil when nothing is close: a wild
// guess would mislead more than no guess.
func Suggest(word string, candidates []string) []string {
	if word == "" {
		return nil
	}
	// One edit per four letters: "lisen" for "listen" is a typo, "out" for "dir" is another word.
	limit := 1 + len(word)/4
	best, nearest := limit, []string(nil)
	for _, c := range candidates {
		switch d := levenshtein.ComputeDistance(word, c); {
		case d < best || d == best && nearest == nil:
			best, nearest = d, []string{c}
		case d == best:
			nearest = append(nearest, c)
		}
	}
	if nearest != nil {
		return nearest
	}
	var prefixed []string
	if len(word) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(c, word) || strings.HasSuffix(c, "-"+word) {
				prefixed = append(prefixed, c)
			}
		}
	}
	return prefixed
}

// DidYouMean is "; did you mean X?" (or "X, Y or Z?") for the suggestions, each shown with prefix
// ("--" for flags); "" when there is none. At most three are named.
func DidYouMean(prefix string, suggestions []string) string {
	if len(suggestions) == 0 {
		return ""
	}
	shown := make([]string, 0, 3)
	for _, s := range suggestions[:min(len(suggestions), 3)] {
		shown = append(shown, prefix+s)
	}
	if len(shown) == 1 {
		return "; did you mean " + shown[0] + "?"
	}
	return "; did you mean " + strings.Join(shown[:len(shown)-1], ", ") + " or " + shown[len(shown)-1] + "?"
}

// flagNames lists fs's flags, help included (the flag package answers -h and -help itself).
func flagNames(fs *flag.FlagSet) []string {
	names := []string{"help"}
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// The flag package's error messages, which it does not export as values. They have not changed since
// Go 1; TestParseErrors would catch a change.
const (
	undefinedFlag = "flag provided but not defined: -"
	needsArgument = "flag needs an argument: -"
	invalidValue  = "invalid value "
	invalidBool   = "invalid boolean value "
)

// rewordParseError says a flag parsing error the way our help spells flags (--name), and suggests the
// nearest flag for an unknown one.
func rewordParseError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, undefinedFlag):
		name := strings.TrimPrefix(msg, undefinedFlag)
		return fmt.Errorf("unknown flag --%s%s", name, DidYouMean("--", Suggest(name, flagNames(fs))))
	case strings.HasPrefix(msg, needsArgument):
		return fmt.Errorf("flag --%s needs a value", strings.TrimPrefix(msg, needsArgument))
	case strings.HasPrefix(msg, invalidValue), strings.HasPrefix(msg, invalidBool):
		// invalid value "2x" for flag -tunnel-find-timeout: parse error
		// invalid boolean value "x" for -dev: parse error
		msg = strings.Replace(msg, " for flag -", " for flag --", 1)
		return fmt.Errorf("%s", strings.Replace(msg, " for -", " for --", 1))
	}
	return err
}
