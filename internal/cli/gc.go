package cli

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// GCPercentAbove has the collector run at GOGC percent once the heap has
// reached floor bytes, and not at all below it. A GOGC the user set
// stands; with only GOMEMLIMIT set, the collector runs at percent from
// the start under the user's limit (no floor, which would replace it). A low GOGC keeps a big run's heap near
// its live tables, but from the runtime's 4 MB minimum it also collects
// a small run over and over as its tables are built: nine collections
// in a 32-to-1 incast's 19 MB, a sixth of its CPU. A memory limit holds
// the first collection back to floor; its end turns the limit off and
// the percent on.
func GCPercentAbove(percent int, floor int64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		debug.SetGCPercent(percent)
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(floor)
	// Unreachable at once: its cleanup runs after the first collection.
	runtime.AddCleanup(new([16]byte), func(percent int) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(math.MaxInt64)
	}, percent)
}
