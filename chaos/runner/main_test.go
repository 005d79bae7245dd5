package runner

import (
	"testing"

	"go.uber.org/goleak"
)

// remotedialerLeak is the goroutine remotedialer leaves for each connection that was stalled when its
// session closed, which nothing outside the library can end (bench/tunnels/remotedialer.go); only
// the runs against remotedialer can leave it.
const remotedialerLeak = "github.com/rancher/remotedialer.pipe"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(remotedialerLeak))
}
