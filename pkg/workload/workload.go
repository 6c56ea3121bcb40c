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
	"unsafe"

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
	lr := &lineReader{sc: sc, file: name}
	n, f, err := lr.next()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, &topo.LineError{File: name, Line: 1, Err: fmt.Errorf("empty workload")}
	}
	if !microFirst(f) {
		return readSimAI(name, n, f, lr, limit)
	}
	w := &Workload{}
	for f != nil {
		if err := w.microLine(name, n, f); err != nil {
			return nil, err
		}
		if n, f, err = lr.next(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// microFirst tells a micro-format first line from a SimAI header: four
// fields led by a count, or an operation where a header has its first
// key, so that a micro line with a bad count or a field missing is
// reported as one (it was read as a header: "field allreduce: "1MiB" is
// not a non-negative integer").
func microFirst(f []string) bool {
	if _, err := strconv.Atoi(f[0]); err == nil && len(f) == 4 {
		return true
	}
	if len(f) < 2 {
		return false
	}
	_, err := nccl.ParseOp(f[1])
	return err == nil
}

// lineReader hands out a workload's non-empty lines one at a time, so
// that a SimAI file's layers are parsed as they come rather than held
// as text too.
type lineReader struct {
	sc   *bufio.Scanner
	file string
	n    int // lines read
}

// next returns the next line with text (comments cut) and its number, or
// nil fields at the end.
func (lr *lineReader) next() (int, []string, error) {
	for lr.sc.Scan() {
		lr.n++
		t := lr.sc.Text()
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = t[:i]
		}
		if f := strings.Fields(t); len(f) > 0 {
			return lr.n, f, nil
		}
	}
	if err := lr.sc.Err(); err != nil {
		return 0, nil, &topo.LineError{File: lr.file, Line: lr.n + 1, Err: err}
	}
	return 0, nil, nil
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
func readSimAI(file string, hn int, h []string, lr *lineReader, limit int64) (*Workload, error) {
	bad := func(ln int, field string, err error) error {
		return &topo.LineError{File: file, Line: ln, Field: field, Err: err}
	}
	m := &AICB{File: file, HeaderLine: hn, Policy: h[0], TP: 1, PP: 1, EP: 1, GA: 1, VPP: 1}
	seen := map[string]string{}
	for i := 1; i+1 < len(h); i += 2 {
		key := strings.TrimSuffix(h[i], ":")
		v, err := strconv.ParseInt(h[i+1], 10, 64)
		if err != nil || v < 0 {
			return nil, bad(hn, key, fmt.Errorf("%q is not a non-negative integer", h[i+1]))
		}
		// A key given twice once kept the last silently.
		if prev, dup := seen[key]; dup {
			return nil, bad(hn, key, fmt.Errorf("given twice in the header (%s then %s %s)", prev, h[i], h[i+1]))
		}
		seen[key] = h[i] + " " + h[i+1]
		const maxPar = 1 << 24
		switch key {
		case "model_parallel_NPU_group", "ep", "pp", "vpp", "ga", "all_gpus":
			if v > maxPar {
				return nil, bad(hn, key, fmt.Errorf("%d is beyond %d", v, maxPar))
			}
		}
		switch key {
		case "model_parallel_NPU_group", "ep", "pp", "vpp", "ga":
			// A group of 0 once ran as 1, a schedule the file did not
			// ask for; --tp 0 and the like are refused the same way.
			if v == 0 {
				return nil, bad(hn, key, fmt.Errorf("0: a parallel size is at least 1"))
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
		return nil, bad(hn, "policy", fmt.Errorf("unknown parallelism policy %q", m.Policy))
	}
	cn, c, err := lr.next()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, bad(hn, "", fmt.Errorf("missing the layer count line"))
	}
	nLayers, err := strconv.Atoi(c[0])
	if err != nil || nLayers < 0 || len(c) != 1 {
		return nil, bad(cn, "layers", fmt.Errorf("expected the number of layers"))
	}
	w := &Workload{TP: m.TP, PP: m.PP, EP: m.EP, AICB: m}
	if err := m.readLayers(lr, cn, nLayers, limit); err != nil {
		return nil, err
	}
	if have := len(m.Layers); have != nLayers {
		// SimAI reads the lines that are there; so do we, and say so.
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s: line %d: announces %d layers, the file has %d: using the %d present", file, cn, nLayers, have, have))
	}
	steps, err := m.ScheduleLimit(m.PP, m.GA, m.VPP, limit)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Field == "layers" {
			return nil, bad(cn, fe.Field, fe.Err)
		}
		if errors.As(err, &fe) {
			return nil, bad(hn, fe.Field, fe.Err)
		}
		return nil, err
	}
	w.Steps = steps
	return w, nil
}

// layerBytes is what a parsed line holds while its schedule is built: its
// Layer, without the text its name keeps (so a lower bound).
const layerBytes = int64(unsafe.Sizeof(Layer{}))

// readLayers parses the layer lines as they come (cn is the count line's
// number, announced its count), refusing in a moment, before holding
// them, a file whose fewest steps are past limit bytes (0: no bound) at
// StepBytes a step, as ScheduleLimit counts them: StepBytes was measured
// with the layers held, so they are not counted again (a file the
// schedule's check accepts is never refused here).
func (m *AICB) readLayers(lr *lineReader, cn, announced int, limit int64) error {
	// Room for the announced lines saves the copies of a growing array
	// (garbage the size of the array, five times over); a count may lie,
	// so no more than a quarter of the budget is set aside.
	room := min(announced, 1<<16)
	if limit > 0 {
		room = int(min(int64(announced), limit/4/layerBytes))
	}
	m.Layers = make([]Layer, 0, room)
	var steps int64
	for {
		ln, f, err := lr.next()
		if err != nil || f == nil {
			return err
		}
		L, err := parseLayer(lr.file, ln, f)
		if err != nil {
			return err
		}
		steps += m.minSteps(&L, len(m.Layers))
		if limit > 0 && steps*StepBytes > limit {
			n := len(m.Layers) + 1
			m.Layers = nil // a refused file's lines: room to count the rest
			return m.refuseLayers(lr, cn, n, steps, limit)
		}
		m.Layers = append(m.Layers, L)
	}
}

// refuseLayers counts the steps of the lines not read yet, holding none of
// them, and says how far past limit the file's steps are.
func (m *AICB) refuseLayers(lr *lineReader, cn, lines int, steps, limit int64) error {
	for {
		ln, f, err := lr.next()
		if err != nil {
			return err
		}
		if f == nil {
			break
		}
		L, err := parseLayer(lr.file, ln, f)
		if err != nil {
			return err
		}
		steps += m.minSteps(&L, lines)
		lines++
	}
	return &topo.LineError{File: lr.file, Line: cn, Field: "layers", Err: fmt.Errorf("%d lines on %d stages make at least %d steps (each line at least once a stage), about %s in memory (%d B a step, its lines included), beyond the %s this machine has (FABRICSIM_MEMORY sets it): simulate fewer layers",
		lines, m.PP, steps, units.HumanSize(steps*StepBytes), StepBytes, units.HumanSize(limit))}
}

// minSteps is the fewest steps line k makes: every stage runs each line
// forward and backward at least once (once a microbatch unless AICB wrote
// the microbatches' copies), its weight-gradient collective only on the
// last microbatch, so left out. MICRO runs each weight-gradient
// collective once. It mirrors the conditions under which
// scheduler.forward and scheduler.backward (pipeline.go) make steps: a
// change there must change it too (TestMinStepsBoundsSchedule, TestMinStepsHandCounted).
func (m *AICB) minSteps(L *Layer, k int) int64 {
	if m.Policy == "MICRO" {
		return one(L.HasWG)
	}
	n := one(L.Fwd > 0) + one(L.HasFwd) + one(L.IG > 0) + one(L.WG > 0)
	if L.HasIG && k > 0 {
		n += 2 // the collective and its wait
	}
	return n * int64(m.PP)
}

func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// parseLayer reads layer line ln of file: "name dep fwd_compute fwd_type
// fwd_size ig_compute ig_type ig_size wg_compute wg_type wg_size wg_update".
func parseLayer(file string, ln int, f []string) (Layer, error) {
	bad := func(field string, err error) error {
		return &topo.LineError{File: file, Line: ln, Field: field, Err: err}
	}
	comm := func(field, typ, size string, def string) (Step, bool, error) {
		sz, err := strconv.ParseInt(size, 10, 64)
		if err != nil || sz < 0 {
			return Step{}, false, bad(field+"_size", fmt.Errorf("%q is not a byte count", size))
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
			return Step{}, false, bad(field+"_type", err)
		}
		return Step{Op: op, Size: sz, Group: g}, true, nil
	}
	ns := func(field, v string) (int64, error) {
		x, err := units.ParseNumber(v) // strictly: NaN passed the range check
		if err != nil || !(x >= 0 && x <= 1e15) {
			return 0, bad(field, fmt.Errorf("%q is not a compute time in ns", v))
		}
		return int64(x * 1000), nil
	}
	var L Layer
	if len(f) != 12 {
		return L, bad("", fmt.Errorf("layer has %d fields, expected 12: name dep fwd_compute fwd_type fwd_size ig_compute ig_type ig_size wg_compute wg_type wg_size wg_update", len(f)))
	}
	var err error
	L.Name, L.Line = f[0], ln
	if L.Fwd, err = ns("fwd_compute", f[2]); err != nil {
		return L, err
	}
	if L.IG, err = ns("ig_compute", f[5]); err != nil {
		return L, err
	}
	if L.WG, err = ns("wg_compute", f[8]); err != nil {
		return L, err
	}
	if _, err := ns("wg_update", f[11]); err != nil {
		return L, err
	}
	if L.FwdC, L.HasFwd, err = comm("fwd", f[3], f[4], TP); err != nil {
		return L, err
	}
	if L.IGC, L.HasIG, err = comm("ig", f[6], f[7], TP); err != nil {
		return L, err
	}
	L.WGC, L.HasWG, err = comm("wg", f[9], f[10], DP)
	return L, err
}
