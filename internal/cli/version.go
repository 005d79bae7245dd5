package cli

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Build is what a binary knows of how it was built.
type Build struct {
	// Module and Version are the main module's path and version: "(devel)" for a build from a work tree,
	// a tag or pseudo-version for `go install module@version`.
	Module, Version string
	// Revision, Time and Modified are the VCS state the binary was built from (go build in a clone
	// stamps them; go run and go test do not): the commit, its time, and whether the work tree had
	// uncommitted changes.
	Revision, Time string
	Modified       bool
	// GoVersion is the Go toolchain that built the binary; Platform is GOOS/GOARCH.
	GoVersion, Platform string
}

// ReadBuild reads the running binary's build information.
func ReadBuild() Build {
	b := Build{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b = buildFrom(bi, b.Platform)
	}
	return b
}

func buildFrom(bi *debug.BuildInfo, platform string) Build {
	b := Build{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion, Platform: platform}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// Line is the build in one line, as --version prints it after the program's name:
// "github.com/tunnelbench/tunnelbench (devel) revision 2dc4…, 2026-05-01T10:00:00Z, modified; go1.26.8 linux/amd64".
func (b Build) Line() string {
	rev := "revision unknown (built without VCS stamping: go run, go test, -buildvcs=false or outside a git clone)"
	if b.Revision != "" {
		rev = "revision " + b.Revision
		if b.Time != "" {
			rev += ", " + b.Time
		}
		if b.Modified {
			rev += ", modified"
		}
	}
	return fmt.Sprintf("%s %s %s; %s %s", cmp.Or(b.Module, "github.com/tunnelbench/tunnelbench"), cmp.Or(b.Version, "(devel)"), rev, b.GoVersion, b.Platform)
}

// Version is the line --version prints for the program name.
func Version(name string) string {
	return name + " " + ReadBuild().Line()
}
