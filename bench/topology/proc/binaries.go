package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// BuildTimeout bounds building the commands.
const BuildTimeout = 10 * time.Minute

// Binaries builds the module's commands (go build ./cmd/...) once, on first use, into a temporary
// directory: tests that run kas or agentk as processes share one build per test binary.
type Binaries struct {
	// Root is the module's root directory.
	Root string

	once sync.Once
	dir  string
	err  error
}

// Path returns the path of the built command name (kas, agentk, tunnelbench), building them all first
// if this is the first call.
func (b *Binaries) Path(name string) (string, error) {
	b.once.Do(b.build)
	if b.err != nil {
		return "", b.err
	}
	return filepath.Join(b.dir, name), nil
}

func (b *Binaries) build() {
	if b.dir, b.err = os.MkdirTemp("", "tunnelbench-bin-"); b.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = b.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.err = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
	}
}
