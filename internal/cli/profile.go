package cli

import (
	"runtime/pprof"

	"github.com/fabricsim/fabricsim/internal/outfile"
)

// StartCPUProfile writes a CPU profile of the rest of the run to path (for
// go tool pprof) until the returned stop is called; an empty path profiles
// nothing. The backends take it as a hidden --cpuprofile flag: at scale,
// where the time goes is the first question.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := outfile.Create(path) // a run stopped half-way leaves no partial profile
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Commit() }, nil
}
