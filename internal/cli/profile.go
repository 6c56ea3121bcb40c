package cli

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile writes a CPU profile of the rest of the run to path (for
// go tool pprof) until the returned stop is called; an empty path profiles
// nothing. The backends take it as a hidden --cpuprofile flag: at scale,
// where the time goes is the first question.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
