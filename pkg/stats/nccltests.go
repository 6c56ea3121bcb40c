package stats

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// NCCLTestsRow is one line of nccl-tests' out-of-place table.
type NCCLTestsRow struct {
	CollectiveID int64
	SizeBytes    int64 // nccl-tests' size: max(send, receive) bytes per rank
	Count        int64 // the per-rank count nccl-tests passes to NCCL
	Type         string
	RedOp        string
	Root         int
	TimeUs       float64
	AlgbwGBps    float64 // 0 for a 0-time row
	BusbwGBps    float64
	// FailedFlows > 0: the collective did not complete (a failed link cut
	// these flows off); its time and bandwidths are NaN, printed N/A.
	FailedFlows int
	// CutFlows > 0: a partial run's stop cut the collective (these flows
	// never finished); likewise N/A.
	CutFlows int64
}

// ncclTestsOp gives nccl-tests' redop and root columns for an operation:
// reductions print "sum", the rest "none"; rooted operations root 0.
func ncclTestsOp(op string) (redop string, root int) {
	switch op {
	case "allreduce", "reducescatter":
		return "sum", -1
	case "reduce":
		return "sum", 0
	case "broadcast", "bcast":
		return "none", 0
	}
	return "none", -1
}

// NCCLTests turns the run's collectives into nccl-tests rows, in
// collective id order, for an element of elem bytes named dtype. The size
// is the trace's coll_size_bytes, which already is what nccl-tests prints
// (the buffer for AllReduce, Broadcast, Reduce, SendRecv; the whole output
// of AllGather, the whole input of ReduceScatter, a rank's whole send
// buffer of AllToAll); the count of the last three is per peer.
func (run *Run) NCCLTests(dtype string, elem int64) ([]NCCLTestsRow, error) {
	if elem <= 0 {
		return nil, fmt.Errorf("element size %d", elem)
	}
	if run.Input == "simai-fct" {
		// Its table would be empty and its average bus bandwidth 0.
		return nil, fmt.Errorf("%s: --format nccl-tests needs a fabricsim trace; SimAI's fct.txt has no collective ids", run.Source)
	}
	rows := make([]NCCLTestsRow, 0, len(run.Collectives))
	for _, c := range run.Collectives {
		r := NCCLTestsRow{CollectiveID: c.ID, SizeBytes: c.SizeBytes, Type: dtype, TimeUs: float64(c.TimeNs) / 1e3}
		r.RedOp, r.Root = ncclTestsOp(c.Op)
		r.Count = c.SizeBytes / elem
		switch c.Op {
		case "allgather", "reducescatter", "alltoall", "alltoallv":
			r.Count /= int64(max(c.NRanks, 1))
		}
		if c.Status != trace.StatusOK {
			r.FailedFlows, r.CutFlows = c.FailedFlows, c.CutFlows
			r.TimeUs, r.AlgbwGBps, r.BusbwGBps = math.NaN(), math.NaN(), math.NaN()
		} else if c.TimeNs > 0 {
			r.AlgbwGBps = Algbw(c.SizeBytes, float64(c.TimeNs))
			if f := BusBwFactor(c.Op, int(c.NRanks)); !math.IsNaN(f) {
				r.BusbwGBps = r.AlgbwGBps * f
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// ncclTestsTime formats a time as nccl-tests does: two decimals below
// 100 us, one below 10 ms, none above.
func ncclTestsTime(us float64) string {
	switch {
	case us > 10000:
		return fmt.Sprintf("%7.0f", us)
	case us > 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

// WriteNCCLTests prints rows in nccl-tests' layout (the out-of-place half
// of its table, #wrong as N/A since nothing is checked), framed by '#'
// lines naming the run, then nccl-tests' closing lines with the mean bus
// bandwidth over the rows.
func (run *Run) WriteNCCLTests(w io.Writer, rows []NCCLTestsRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# fabricsim %s: %s", orStr(run.Backend, run.Input), run.Source)
	if t := run.Topology; t != nil {
		fmt.Fprintf(bw, ", %s, %d GPUs", t.Family, t.GPUs)
	}
	fmt.Fprintf(bw, ", %d collectives\n", len(rows))
	if run.Partial {
		fmt.Fprintf(bw, "# PARTIAL: the run stopped early; %d flows never finished and are not in these rows\n", run.UnfinishedFlows)
	}
	writeNotes(bw, run.Notes, "# ")
	ops := map[string]bool{}
	for _, c := range run.Collectives {
		ops[fmt.Sprintf("%s on %s of %s (%s)", c.Op, units.Plural(int64(c.NRanks), "rank"), orStr(c.GroupType, "?"), c.Algorithm)] = true
	}
	for _, o := range slices.Sorted(maps.Keys(ops)) {
		fmt.Fprintf(bw, "#   %s\n", o)
	}
	fmt.Fprintf(bw, "#\n")
	fmt.Fprintf(bw, "# %10s  %12s  %8s  %6s  %6s           out-of-place\n", "", "", "", "", "")
	fmt.Fprintf(bw, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(bw, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
	sum, zero, failed, cut := 0.0, 0, 0, 0
	for _, r := range rows {
		if r.FailedFlows > 0 || r.CutFlows > 0 {
			// nccl-tests' #wrong column counts what went wrong: here the flows.
			what, n := "FAILED", int64(r.FailedFlows)
			if r.FailedFlows > 0 {
				failed++
			} else {
				what, n = "CUT", r.CutFlows
				cut++
			}
			fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6s  %6s  %5d\n", r.SizeBytes, r.Count, r.Type, r.RedOp, r.Root,
				what, "N/A", "N/A", n)
			continue
		}
		fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5s\n", r.SizeBytes, r.Count, r.Type, r.RedOp, r.Root,
			ncclTestsTime(r.TimeUs), r.AlgbwGBps, r.BusbwGBps, "N/A")
		sum += r.BusbwGBps
		if r.TimeUs == 0 {
			zero++
		}
	}
	if zero > 0 {
		fmt.Fprintf(bw, "# moved nothing (0 bytes or 1 rank), printed with time and bandwidth 0: %d of the rows\n", zero)
	}
	if failed > 0 {
		fmt.Fprintf(bw, "# FAILED: %d of the collectives had flows a failed link cut off (status failed; #wrong counts them): no time or bandwidth, left out of the average\n", failed)
	}
	if cut > 0 {
		fmt.Fprintf(bw, "# CUT: %d of the collectives were cut by the run's stop (status cut; #wrong counts their flows that never finished): no time or bandwidth, left out of the average\n", cut)
	}
	avg := 0.0
	if len(rows) > failed+cut {
		avg = sum / float64(len(rows)-failed-cut)
	}
	fmt.Fprintf(bw, "# Out of bounds values : 0 OK\n")
	fmt.Fprintf(bw, "# Avg bus bandwidth    : %s \n", strconv.FormatFloat(avg, 'g', 6, 64)) // C's %g: 6 digits
	fmt.Fprintf(bw, "#\n")
	return bw.Flush()
}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
