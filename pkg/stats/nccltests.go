package stats

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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
	rows := make([]NCCLTestsRow, 0, len(run.Collectives))
	for _, c := range run.Collectives {
		r := NCCLTestsRow{CollectiveID: c.ID, SizeBytes: c.SizeBytes, Type: dtype, TimeUs: float64(c.TimeNs) / 1e3}
		r.RedOp, r.Root = ncclTestsOp(c.Op)
		r.Count = c.SizeBytes / elem
		switch c.Op {
		case "allgather", "reducescatter", "alltoall", "alltoallv":
			r.Count /= int64(max(c.NRanks, 1))
		}
		if c.Status == trace.StatusFailed {
			r.FailedFlows = c.FailedFlows
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
	sum, zero, failed := 0.0, 0, 0
	for _, r := range rows {
		if r.FailedFlows > 0 {
			// nccl-tests' #wrong column counts what went wrong: here the flows.
			fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6s  %6s  %5d\n", r.SizeBytes, r.Count, r.Type, r.RedOp, r.Root,
				"FAILED", "N/A", "N/A", r.FailedFlows)
			failed++
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
	avg := 0.0
	if len(rows) > failed {
		avg = sum / float64(len(rows)-failed)
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

// Reference is a published bandwidth curve: rows of an nccl-tests table.
type Reference struct {
	Label string
	Path  string
	Rows  []NCCLTestsRow // SizeBytes, TimeUs, AlgbwGBps, BusbwGBps
}

// ReadReference reads a reference CSV of examples/reference/: '#' comment
// lines (a "# label: ..." line names the curve), a header
// size_bytes,time_us,algbw_gbps,busbw_gbps, then one row per size. Errors
// name the file and line.
func ReadReference(path string) (*Reference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseReference(f, path)
}

// ParseReference reads a reference CSV from r; path names it in errors
// and gives the default label.
func ParseReference(r io.Reader, path string) (*Reference, error) {
	ref := &Reference{Path: path, Label: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	sc := bufio.NewScanner(r)
	ln, header := 0, false
	want := []string{"size_bytes", "time_us", "algbw_gbps", "busbw_gbps"}
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			if v, ok := strings.CutPrefix(strings.TrimSpace(line[1:]), "label:"); ok {
				ref.Label = strings.TrimSpace(v)
			}
			continue
		}
		fields := strings.Split(line, ",")
		if !header {
			if strings.Join(fields, ",") != strings.Join(want, ",") {
				return nil, fmt.Errorf("%s: line %d: header %q, want %q", path, ln, line, strings.Join(want, ","))
			}
			header = true
			continue
		}
		if len(fields) != len(want) {
			return nil, fmt.Errorf("%s: line %d: %d fields, want %d (%s)", path, ln, len(fields), len(want), strings.Join(want, ","))
		}
		var r NCCLTestsRow
		var v [4]float64
		for i, s := range fields {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return nil, fmt.Errorf("%s: line %d, field %s: %q is not a non-negative number", path, ln, want[i], s)
			}
			v[i] = x
		}
		if v[0] != math.Trunc(v[0]) || v[0] > math.MaxInt64/2 {
			return nil, fmt.Errorf("%s: line %d, field size_bytes: %q is not a whole number of bytes", path, ln, fields[0])
		}
		r.SizeBytes, r.TimeUs, r.AlgbwGBps, r.BusbwGBps = int64(v[0]), v[1], v[2], v[3]
		ref.Rows = append(ref.Rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", path, ln+1, err)
	}
	if len(ref.Rows) == 0 {
		return nil, fmt.Errorf("%s: no rows (want a %s header and rows)", path, strings.Join(want, ","))
	}
	return ref, nil
}

// BusbwSeries is one curve of a bus bandwidth plot.
type BusbwSeries struct {
	Name      string
	Rows      []NCCLTestsRow
	Reference bool // published measurements: points only, dashed
}

// BusbwPlot draws bus bandwidth against size as nccl-tests users read it:
// GB/s over a log2 size axis, one line per series. Rows of size 0 have no
// place on a log axis and are left out.
func BusbwPlot(title string, series []BusbwSeries) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size"
	plainAxis(&p.Y, "bus bandwidth", "GB/s")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	for i, s := range series {
		pts := make(plotter.XYs, 0, len(s.Rows))
		for _, r := range s.Rows {
			if r.SizeBytes > 0 && !math.IsNaN(r.BusbwGBps) {
				pts = append(pts, plotter.XY{X: float64(r.SizeBytes), Y: r.BusbwGBps})
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue // every value is finite by construction
		}
		c := seriesColor(s.Name, i)
		l.Color, sc.Color = c, c
		l.Width = vg.Points(1.5)
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(2)
		if s.Reference {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			sc.Shape = draw.BoxGlyph{}
			sc.Radius = vg.Points(4) // a published plateau is often one point
		}
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
		p.Y.Max = max(p.Y.Max, pts[len(pts)-1].Y)
	}
	for _, s := range series {
		for _, r := range s.Rows {
			if !math.IsNaN(r.BusbwGBps) { // a failed collective's
				p.Y.Max = max(p.Y.Max, r.BusbwGBps)
			}
		}
	}
	p.Y.Max *= 1.05 + 0.06*float64(len(series)) // room for the legend above the plateau
	return p
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sizeTicks marks powers of two on a log axis: every fourth labelled
// (1B, 16B, 256B, 4KiB, ...), the rest as minor ticks.
type sizeTicks struct{}

// Ticks implements plot.Ticker.
func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	if lo <= 0 {
		lo = 1
	}
	for k := math.Floor(math.Log2(lo)); k <= math.Ceil(math.Log2(hi)) && k < 63; k++ {
		v := math.Exp2(k)
		if v < lo || v > hi {
			continue
		}
		t := plot.Tick{Value: v}
		if int(k)%4 == 0 || hi/lo < 64 {
			t.Label = units.HumanSize(int64(v))
		}
		out = append(out, t)
	}
	return out
}
