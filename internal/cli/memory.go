package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// MemoryBudget is how many bytes a run may hold: FABRICSIM_MEMORY (a
// size, e.g. 8GiB) when set, else 90% of the kernel's MemAvailable, or of
// the address-space limit (ulimit -v) when that is lower, else 0 (no
// check). Backends stop reading a stream that would not fit, with an
// estimate, instead of being killed for want of memory.
func MemoryBudget() (int64, error) {
	if v := os.Getenv("FABRICSIM_MEMORY"); v != "" {
		n, err := units.ParseSize(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("FABRICSIM_MEMORY=%q: want a size such as 8GiB", v)
		}
		return n, nil
	}
	avail := memAvailable()
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur < 1<<62 { // unlimited is all ones
		// A process past it dies of "out of memory" whatever the
		// machine has free. Go reserves over 1 GB of address space it
		// never touches (VmSize of an empty program), so the budget is
		// what is left above today's size, less a fifth for what the
		// runtime reserves as the heap grows.
		as := (int64(rl.Cur) - procStatusKB("VmSize")*1024) / 5 * 4
		if as < 1 {
			as = 1 // nothing left: every estimate is over
		}
		if avail == 0 || as < avail {
			return as, nil
		}
	}
	return avail, nil
}

// procStatusKB is a kB field of /proc/self/status, 0 if unknown.
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// memAvailable is 90% of the kernel's MemAvailable, 0 if unknown.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024 / 10 * 9
		}
	}
	return 0
}
