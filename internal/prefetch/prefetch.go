// Package prefetch asks the CPU to start loading a cache line that the
// caller will read soon. A packet simulator at 1024 GPUs keeps more packets
// and ports than the caches hold, and without it every event waits for
// memory; with it the load overlaps the event before.
package prefetch

import "unsafe"

// Line starts loading the cache line holding p; it never faults and has no
// effect on the program's results.
func Line(p unsafe.Pointer) { line(p) }

// Value starts loading the cache lines holding the first and the last
// byte of *p: all of a record of up to two lines, wherever it is aligned.
func Value[T any](p *T) {
	line(unsafe.Pointer(p))
	line(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p)-1))
}
