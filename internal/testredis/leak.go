package testredis

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakGrace is how long VerifyTestMain lets goroutines end. go-redis starts a dial probe after repeated
// failed dials, and the probe notices Client.Close only after its current dial (at most the dial timeout)
// and a one second sleep.
const leakGrace = 5 * time.Second

// VerifyTestMain is goleak.VerifyTestMain for packages whose tests take Redis away while a go-redis client
// is connected: it runs the tests, then reports goroutines that are still alive leakGrace later. Use it as
//
//	func TestMain(m *testing.M) { testredis.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakGrace)
		for {
			err := goleak.Find(opts...) // retries for a few hundred milliseconds itself
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}
