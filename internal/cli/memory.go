package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// MemoryBudget is how many bytes a run may hold: FABRICSIM_MEMORY (a
// size, e.g. 8GiB) when set, else 90% of the kernel's MemAvailable, else
// 0 (no check). Backends stop reading a stream that would not fit, with an
// estimate, instead of being killed for want of memory.
func MemoryBudget() (int64, error) {
	if v := os.Getenv("FABRICSIM_MEMORY"); v != "" {
		n, err := units.ParseSize(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("FABRICSIM_MEMORY=%q: want a size such as 8GiB", v)
		}
		return n, nil
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, nil
			}
			return kb * 1024 / 10 * 9, nil
		}
	}
	return 0, nil
}
