//go:build !race

package runner

// raceDetector says that the tests run with -race.
const raceDetector = false
