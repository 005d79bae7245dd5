package deploy

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/deploy/secrets"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// binaries are what the image holds, as the manifests run them.
var binaries = []string{"kas", "agentk", "tunnelbench"}

// stage is one FROM of a Dockerfile and its instructions, continuation lines joined.
type stage struct {
	from, name string
	instrs     [][2]string // instruction (upper case), its arguments
}

// parseDockerfile reads the Dockerfile's stages. It knows the syntax this Dockerfile uses: comments,
// continuation lines, one instruction per logical line.
func parseDockerfile(text string) ([]*stage, error) {
	var (
		stages  []*stage
		logical strings.Builder
	)
	flush := func() error {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		switch {
		case cmd == "FROM":
			f := strings.Fields(args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			s := &stage{}
			switch {
			case len(f) == 1:
				s.from = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				s.from, s.name = f[0], f[2]
			default:
				return fmt.Errorf("FROM %s: want IMAGE [AS NAME]", args)
			}
			stages = append(stages, s)
		case len(stages) == 0:
			if cmd != "ARG" {
				return fmt.Errorf("%s before the first FROM", cmd)
			}
		default:
			s := stages[len(stages)-1]
			s.instrs = append(s.instrs, [2]string{cmd, args})
		}
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // comments, parser directives, and comment lines inside continued instructions
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if logical.Len() > 0 {
		return nil, fmt.Errorf("the last instruction ends in a continuation")
	}
	return stages, sc.Err()
}

func readDockerfile(t *testing.T) []*stage {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages, err := parseDockerfile(string(b))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return stages
}

// buildRun returns the build stage, its ENV settings and its RUN line that runs go build.
func buildRun(t *testing.T, stages []*stage) (build *stage, env map[string]string, run string) {
	t.Helper()
	for _, s := range stages {
		if s.name == "build" {
			build = s
		}
	}
	if build == nil {
		t.Fatal("Dockerfile: no stage AS build")
	}
	env = map[string]string{}
	for _, in := range build.instrs {
		switch in[0] {
		case "ENV":
			for _, kv := range strings.Fields(in[1]) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %s: want KEY=VALUE", in[1])
				}
				env[k] = v
			}
		case "RUN":
			if strings.Contains(in[1], "go build") {
				run = in[1]
			}
		}
	}
	if run == "" {
		t.Fatal("Dockerfile: the build stage runs no go build")
	}
	// BuildKit's RUN options (cache mounts) are no part of the command.
	for strings.HasPrefix(run, "--") {
		_, run, _ = strings.Cut(run, " ")
		run = strings.TrimSpace(run)
	}
	return build, env, run
}

// imageUser is the uid and gid the image runs as (USER of the last stage), which must be numeric and
// not root: the final image has no /etc/passwd, and Kubernetes's runAsNonRoot checks numbers.
func imageUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	stages := readDockerfile(t)
	user := ""
	for _, in := range stages[len(stages)-1].instrs {
		if in[0] == "USER" {
			user = in[1]
		}
	}
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		t.Fatalf("Dockerfile: final USER %q: want a numeric, non-root UID:GID", user)
	}
	return uid, gid
}

// TestDockerfile: a multi-stage build whose binaries are static (CGO_ENABLED=0) and built by the Go
// version go.mod asks for, copied alone into an empty image that runs as a non-root user; the build
// context leaves out .git, results and the deployment's secrets.
func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	build, env, run := buildRun(t, stages)
	if env["CGO_ENABLED"] != "0" {
		t.Errorf("build stage: CGO_ENABLED=%q, want 0 for static binaries", env["CGO_ENABLED"])
	}
	if !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("build stage from %s, want golang", build.from)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goDirective := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	argGo := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\d+\.\d+)\.\d+$`).FindSubmatch(mustRead(t, "Dockerfile"))
	if goDirective == nil || argGo == nil || string(goDirective[1]) != string(argGo[1]) {
		t.Errorf("Dockerfile ARG GO_VERSION %q, go.mod asks for go %q", argGo, goDirective)
	}
	for _, b := range binaries {
		if !strings.Contains(run, "./cmd/"+b) {
			t.Errorf("go build does not build ./cmd/%s: %s", b, run)
		}
	}
	if !strings.Contains(run, "-o /out/") {
		t.Errorf("go build does not write into /out/: %s", run)
	}
	final := stages[len(stages)-1]
	if final.from != "scratch" {
		t.Errorf("final stage from %s, want scratch (nothing but the binaries)", final.from)
	}
	copied := false
	for _, in := range final.instrs {
		switch in[0] {
		case "COPY":
			if in[1] == "--from=build /out/ "+imageBinDir+"/" {
				copied = true
			}
		case "RUN":
			t.Errorf("final stage: RUN %s (the image has no shell)", in[1])
		}
	}
	if !copied {
		t.Errorf("final stage does not copy the binaries into %s", imageBinDir)
	}
	imageUser(t)

	ignore := strings.Fields(string(mustRead(t, "Dockerfile.dockerignore")))
	for _, want := range []string{".git", secrets.DefaultDir + "/", "results/"} {
		found := false
		for _, l := range ignore {
			found = found || l == want
		}
		if !found {
			t.Errorf("Dockerfile.dockerignore does not leave out %s", want)
		}
	}

	if _, err := parseDockerfile("FROM a AS b\nRUN x \\\n"); err == nil {
		t.Error("a dangling continuation parsed")
	}
}

// TestStaticBinaries runs the Dockerfile's go build, with the build stage's environment, and checks that
// each binary is static: no program interpreter, no shared library, as an image FROM scratch needs.
func TestStaticBinaries(t *testing.T) {
	testtier.Full(t, "builds the commands")
	stages := readDockerfile(t)
	_, env, run := buildRun(t, stages)
	out := t.TempDir()
	run = strings.ReplaceAll(run, "-o /out/", "-o "+out+"/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", run)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", run, err, b)
	}
	for _, b := range binaries {
		f, err := elf.Open(filepath.Join(out, b))
		if err != nil {
			t.Fatal(err)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			t.Error(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: has a program interpreter (dynamically linked)", b)
			}
		}
		if len(libs) > 0 {
			t.Errorf("%s: needs %v", b, libs)
		}
		f.Close()
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
