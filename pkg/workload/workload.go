// Package workload is what a job runs, before any NCCL choice: SimAI/AICB
// workload files and fabricsim's micro format read into per-stage programs
// of steps, AICB's layer layout and its 1F1B pipeline schedule
// (pipeline.go), nccl-tests size sweeps, and the Megatron-style rank layout
// of the TP/DP/PP/EP groups (layout.go).
package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Step is one instruction of the ranks of one pipeline stage (or of every
// rank), in program order.
type Step struct {
	ComputePs int64   // > 0: a compute phase of this length
	Op        nccl.Op // else a collective
	Size      int64   // bytes
	Group     string  // TP, DP, PP, EP, DP_EP
	Async     bool    // issue and continue; Wait joins it later
	Tag       string  // names an async collective (or a PP transfer) for Wait
	Wait      string  // > "": wait for the async collective with this tag
	Barrier   bool    // every rank waits until all ranks have reached it
	Label     string  // layer and phase, for traces and summaries

	// Staged steps are run by the ranks of pipeline stage Stage only,
	// others by every rank. A PP transfer (Group PP, Staged) goes from
	// Stage to Peer, the sender blocking until it is delivered, the
	// receiver joining it at its Wait for Tag.
	Staged bool
	Stage  int
	Peer   int

	Layer      int32  // workload layer index, -1 outside layers
	LayerName  string // the layer's name
	Phase      string // fwd, ig, wg, pp or ""
	Microbatch int32  // -1 for iteration-level work
}

// Workload is a program plus the parallelism it was written for.
type Workload struct {
	Steps []Step
	TP    int
	PP    int
	EP    int

	// AICB is the parsed SimAI/AICB file, nil for other workloads; its
	// schedule (Steps) follows PP, GA and VPP.
	AICB *AICB
	// Warnings are things SimAI accepts that a user should know about.
	Warnings []string
}

// Read reads a SimAI/AICB workload file or fabricsim's micro
// format ("passes OP size GROUP" per line), telling them apart by the
// first line.
func Read(r io.Reader, name string) (*Workload, error) {
	return ReadLimit(r, name, 0)
}

// ReadLimit is Read whose SimAI/AICB schedule is bounded
// by limit bytes (ScheduleLimit).
func ReadLimit(r io.Reader, name string, limit int64) (*Workload, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	type line struct {
		n int
		f []string
	}
	var lines []line
	n := 0
	for sc.Scan() {
		n++
		t := sc.Text()
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = t[:i]
		}
		if f := strings.Fields(t); len(f) > 0 {
			lines = append(lines, line{n, f})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &topo.LineError{File: name, Line: n + 1, Err: err}
	}
	if len(lines) == 0 {
		return nil, &topo.LineError{File: name, Line: 1, Err: fmt.Errorf("empty workload")}
	}
	if _, err := strconv.Atoi(lines[0].f[0]); err == nil && len(lines[0].f) == 4 {
		w := &Workload{}
		for _, l := range lines {
			if err := w.microLine(name, l.n, l.f); err != nil {
				return nil, err
			}
		}
		return w, nil
	}
	simai := make([][]string, len(lines))
	nums := make([]int, len(lines))
	for i, l := range lines {
		simai[i], nums[i] = l.f, l.n
	}
	return readSimAI(name, simai, nums, limit)
}

func (w *Workload) microLine(file string, ln int, f []string) error {
	bad := func(field string, err error) error {
		return &topo.LineError{File: file, Line: ln, Field: field, Err: err}
	}
	if len(f) != 4 {
		return bad("", fmt.Errorf("%d fields, expected 4: <passes> <OP> <size> <GROUP>", len(f)))
	}
	passes, err := strconv.Atoi(f[0])
	if err != nil || passes < 1 || passes > 1<<20 {
		return bad("passes", fmt.Errorf("%q is not a positive count", f[0]))
	}
	op, err := nccl.ParseOp(f[1])
	if err != nil {
		return bad("op", err)
	}
	size, err := units.ParseSize(f[2])
	if err != nil {
		return bad("size", err)
	}
	g := strings.ToUpper(f[3])
	switch g {
	case TP, DP, PP, EP, DPEP:
	default:
		return bad("group", fmt.Errorf("unknown group %q (TP, DP, PP, EP, DP_EP)", f[3]))
	}
	for i := 0; i < passes; i++ {
		w.Steps = append(w.Steps, Step{Op: op, Size: size, Group: g, Label: fmt.Sprintf("line%d/%d", ln, i)})
	}
	return nil
}

// readSimAI parses SimAI's workload: a header with the parallel sizes, the
// layer count, then per layer "name dep fwd_compute fwd_type fwd_size
// ig_compute ig_type ig_size wg_compute wg_type wg_size wg_update".
// Compute times are nanoseconds. A plain collective runs on TP in the
// forward and input-gradient columns and on DP in the weight-gradient
// column; suffixes _EP, _DP_EP, _DP and _TP pick the group. The schedule
// (Steps) is built from the header's pp, ga and vpp (see AICB.Schedule).
func readSimAI(file string, lines [][]string, nums []int, limit int64) (*Workload, error) {
	bad := func(i int, field string, err error) error {
		return &topo.LineError{File: file, Line: nums[i], Field: field, Err: err}
	}
	m := &AICB{File: file, HeaderLine: nums[0], Policy: lines[0][0], TP: 1, PP: 1, EP: 1, GA: 1, VPP: 1}
	h := lines[0]
	seen := map[string]string{}
	for i := 1; i+1 < len(h); i += 2 {
		key := strings.TrimSuffix(h[i], ":")
		v, err := strconv.ParseInt(h[i+1], 10, 64)
		if err != nil || v < 0 {
			return nil, bad(0, key, fmt.Errorf("%q is not a non-negative integer", h[i+1]))
		}
		// A key given twice once kept the last silently.
		if prev, dup := seen[key]; dup {
			return nil, bad(0, key, fmt.Errorf("given twice in the header (%s then %s %s)", prev, h[i], h[i+1]))
		}
		seen[key] = h[i] + " " + h[i+1]
		const maxPar = 1 << 24
		switch key {
		case "model_parallel_NPU_group", "ep", "pp", "vpp", "ga", "all_gpus":
			if v > maxPar {
				return nil, bad(0, key, fmt.Errorf("%d is beyond %d", v, maxPar))
			}
		}
		switch key {
		case "model_parallel_NPU_group", "ep", "pp", "vpp", "ga":
			// A group of 0 once ran as 1, a schedule the file did not
			// ask for; --tp 0 and the like are refused the same way.
			if v == 0 {
				return nil, bad(0, key, fmt.Errorf("0: a parallel size is at least 1"))
			}
		}
		switch key {
		case "model_parallel_NPU_group":
			m.TP = int(v)
		case "ep":
			m.EP = int(v)
		case "pp":
			m.PP = int(v)
		case "vpp":
			m.VPP = int(v)
		case "ga":
			m.GA = int(v)
		case "all_gpus":
			m.AllGPUs = int(v)
		case "pp_comm":
			m.PPComm = v
		}
	}
	switch m.Policy {
	case "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED", "DATA", "MODEL", "MICRO":
	default:
		return nil, bad(0, "policy", fmt.Errorf("unknown parallelism policy %q", m.Policy))
	}
	if len(lines) < 2 {
		return nil, bad(0, "", fmt.Errorf("missing the layer count line"))
	}
	nLayers, err := strconv.Atoi(lines[1][0])
	if err != nil || nLayers < 0 || len(lines[1]) != 1 {
		return nil, bad(1, "layers", fmt.Errorf("expected the number of layers"))
	}
	w := &Workload{TP: m.TP, PP: m.PP, EP: m.EP, AICB: m}
	if have := len(lines) - 2; have != nLayers {
		// SimAI reads the lines that are there; so do we, and say so.
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s: line %d: announces %d layers, the file has %d: using the %d present", file, nums[1], nLayers, have, have))
	}
	comm := func(i int, field, typ, size string, def string) (Step, bool, error) {
		sz, err := strconv.ParseInt(size, 10, 64)
		if err != nil || sz < 0 {
			return Step{}, false, bad(i, field+"_size", fmt.Errorf("%q is not a byte count", size))
		}
		if strings.EqualFold(typ, "NONE") || sz == 0 {
			return Step{}, false, nil
		}
		g := def
		t := strings.ToUpper(typ)
		switch {
		case strings.HasSuffix(t, "_DP_EP"):
			g, t = DPEP, strings.TrimSuffix(t, "_DP_EP")
		case strings.HasSuffix(t, "_EP"):
			g, t = EP, strings.TrimSuffix(t, "_EP")
		case strings.HasSuffix(t, "_DP"):
			g, t = DP, strings.TrimSuffix(t, "_DP")
		case strings.HasSuffix(t, "_TP"):
			g, t = TP, strings.TrimSuffix(t, "_TP")
		}
		op, err := nccl.ParseOp(t)
		if err != nil {
			return Step{}, false, bad(i, field+"_type", err)
		}
		return Step{Op: op, Size: sz, Group: g}, true, nil
	}
	ns := func(i int, field, v string) (int64, error) {
		x, err := units.ParseNumber(v) // strictly: NaN passed the range check
		if err != nil || !(x >= 0 && x <= 1e15) {
			return 0, bad(i, field, fmt.Errorf("%q is not a compute time in ns", v))
		}
		return int64(x * 1000), nil
	}
	m.Layers = make([]Layer, len(lines)-2)
	for k := range m.Layers {
		i := k + 2
		f := lines[i]
		if len(f) != 12 {
			return nil, bad(i, "", fmt.Errorf("layer has %d fields, expected 12: name dep fwd_compute fwd_type fwd_size ig_compute ig_type ig_size wg_compute wg_type wg_size wg_update", len(f)))
		}
		L := &m.Layers[k]
		L.Name, L.Line = f[0], nums[i]
		if L.Fwd, err = ns(i, "fwd_compute", f[2]); err != nil {
			return nil, err
		}
		if L.IG, err = ns(i, "ig_compute", f[5]); err != nil {
			return nil, err
		}
		if L.WG, err = ns(i, "wg_compute", f[8]); err != nil {
			return nil, err
		}
		if _, err := ns(i, "wg_update", f[11]); err != nil {
			return nil, err
		}
		if L.FwdC, L.HasFwd, err = comm(i, "fwd", f[3], f[4], TP); err != nil {
			return nil, err
		}
		if L.IGC, L.HasIG, err = comm(i, "ig", f[6], f[7], TP); err != nil {
			return nil, err
		}
		if L.WGC, L.HasWG, err = comm(i, "wg", f[9], f[10], DP); err != nil {
			return nil, err
		}
	}
	steps, err := m.ScheduleLimit(m.PP, m.GA, m.VPP, limit)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Field == "layers" {
			return nil, bad(1, fe.Field, fe.Err)
		}
		if errors.As(err, &fe) {
			return nil, bad(0, fe.Field, fe.Err)
		}
		return nil, err
	}
	w.Steps = steps
	return w, nil
}
