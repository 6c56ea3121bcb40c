package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// GCPercentAbove: no collection until the heap reaches the floor, then
// the percent asked for, with no memory limit left behind.
func TestGCPercentAbove(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	const floor = 32 << 20
	GCPercentAbove(37, floor)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs := ms.NumGC
	var keep [][]byte
	for range 8 { // 8 MB, far below the floor
		keep = append(keep, make([]byte, 1<<20))
	}
	if runtime.ReadMemStats(&ms); ms.NumGC != gcs {
		t.Fatalf("%d collections below the floor", ms.NumGC-gcs)
	}
	for range 64 { // 64 MB of garbage: past the floor
		sink = make([]byte, 1<<20)
	}
	deadline := time.Now().Add(10 * time.Second) // the cleanup runs on its own goroutine
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == 37 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after the floor was reached, want 37", p)
		}
		runtime.Gosched()
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("memory limit %d left after the floor", l)
	}
	runtime.KeepAlive(keep)
}

// A user's GOGC stands; a user's GOMEMLIMIT alone keeps its limit and
// gets the percent (as before the floor: GOGC 20 under any limit).
func TestGCPercentAboveUserSettings(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "")
	GCPercentAbove(37, 32<<20)
	if p := debug.SetGCPercent(-1); p != 100 {
		t.Errorf("GOGC set: percent %d, want the user's 100", p)
	}
	debug.SetGCPercent(100)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	GCPercentAbove(37, 32<<20)
	if p := debug.SetGCPercent(-1); p != 37 {
		t.Errorf("GOMEMLIMIT set: percent %d, want 37", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 1<<30 {
		t.Errorf("GOMEMLIMIT set: limit %d, want the user's 1 GiB", l)
	}
}

var sink []byte
