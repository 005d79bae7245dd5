// Package testtier splits the tests in two tiers: the short tier (go test -short, make test-short) for
// the edit loop, and the full tier (make test, what CI runs). A test or fixture that needs an external
// binary (redis-server, prometheus, promtool), builds the commands, or runs seconds of load calls Full
// first. It never skips outside -short: the full tier runs every test, and a missing binary fails there.
//
// It is test support only; production code never imports it.
package testtier

import "testing"

// Full skips t under -short, saying why in one line ("needs redis-server; run make test"); outside
// -short it does nothing. why says what the test needs that the short tier does not have.
func Full(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + "; run make test")
	}
}
