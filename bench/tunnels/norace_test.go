//go:build !race

package tunnels

// raceDetector says that the tests run with -race.
const raceDetector = false
