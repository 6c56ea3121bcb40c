//go:build race

package packet

// raceDetector: the tests run under the race detector (make test's race
// step), where each run is several times slower and what matters is the
// goroutines' sharing, not each configuration's arithmetic.
const raceDetector = true
