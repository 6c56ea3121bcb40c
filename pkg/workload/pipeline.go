package workload

import (
	"fmt"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Layer is one line of a SimAI/AICB workload: compute times (ps) and
// collectives of its forward, input-gradient and weight-gradient passes.
type Layer struct {
	Name                 string
	Line                 int
	Fwd, IG, WG          int64
	FwdC, IGC, WGC       Step
	HasFwd, HasIG, HasWG bool
}

// AICB is a parsed SimAI/AICB workload: its header and its layer lines.
type AICB struct {
	File       string
	HeaderLine int
	Policy     string
	TP, PP, EP int
	VPP, GA    int
	AllGPUs    int
	PPComm     int64 // bytes of activation each microbatch hands to the next stage
	Layers     []Layer
}

// FieldError is a schedule parameter that does not fit the workload; the
// caller names where the value came from (header field or flag).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// split finds AICB's layout: the lines before the microbatches (iteration
// level work), ga consecutive copies of one microbatch's layers, and the
// lines after. AICB writes a stage's layers once per microbatch; SimAI
// runs them back to back, and so its per-layer compute is that of the
// whole iteration. A file without ga copies is one microbatch that every
// microbatch runs. Among decompositions the one covering the most lines
// wins, then the earliest. ga is the file's own (its header's, at least
// 1): a transformer's layers repeat their names, so a --ga the file was
// not written with would cut one microbatch's layers into that many
// pieces.
func (m *AICB) split() (pre, post [2]int, blocks [][2]int) {
	n, ga := len(m.Layers), max(m.GA, 1)
	if ga > 1 {
		for p := n / ga; p >= 1; p-- {
			for i := 0; i+p*ga <= n; i++ {
				if m.repeats(i, p, ga) {
					for k := 0; k < ga; k++ {
						blocks = append(blocks, [2]int{i + k*p, i + (k+1)*p})
					}
					return [2]int{0, i}, [2]int{i + p*ga, n}, blocks
				}
			}
		}
	}
	for k := 0; k < ga; k++ {
		blocks = append(blocks, [2]int{0, n})
	}
	return [2]int{0, 0}, [2]int{n, n}, blocks
}

// repeats reports whether lines i.. hold ga copies of the p names from i.
func (m *AICB) repeats(i, p, ga int) bool {
	for k := 1; k < ga; k++ {
		for j := 0; j < p; j++ {
			if m.Layers[i+k*p+j].Name != m.Layers[i+j].Name {
				return false
			}
		}
	}
	return true
}

// layerStarts returns where the transformer layers of lines [a, b) begin:
// a line named attention* after one that is not, or after one of the same
// name (AICB names a layer's lines attention_layer, or attention_column
// then attention_row), or every line when no line is so named. Lines before the first start belong to the first
// layer.
func (m *AICB) layerStarts(a, b int) []int {
	var starts []int
	attn := func(i int) bool { return strings.HasPrefix(m.Layers[i].Name, "attention") }
	for i := a; i < b; i++ {
		if attn(i) && (i == a || !attn(i-1) || m.Layers[i-1].Name == m.Layers[i].Name) {
			starts = append(starts, i)
		}
	}
	if len(starts) == 0 {
		for i := a; i < b; i++ {
			starts = append(starts, i)
		}
	}
	if len(starts) > 0 {
		starts[0] = a
	}
	return starts
}

// maxScheduleSteps bounds a schedule's size (about 20 GB of steps).
const maxScheduleSteps = 1 << 27

// unit is one forward or backward pass of one microbatch through one model
// chunk on one stage.
type unit struct {
	mb, chunk int
	fwd       bool
}

// pipelineOrder is Megatron-LM's order of passes on stage s of p with m
// microbatches and v model chunks per stage: 1F1B (warm-up forwards,
// alternating forward and backward, cool-down backwards) and, with v > 1,
// the interleaved 1F1B schedule.
func pipelineOrder(s, p, m, v int) []unit {
	var out []unit
	if v == 1 {
		warm := min(p-s-1, m)
		for i := 0; i < warm; i++ {
			out = append(out, unit{i, 0, true})
		}
		for i := 0; i < m-warm; i++ {
			out = append(out, unit{warm + i, 0, true}, unit{i, 0, false})
		}
		for i := m - warm; i < m; i++ {
			out = append(out, unit{i, 0, false})
		}
		return out
	}
	total := m * v
	at := func(k int, fwd bool) unit {
		g, r := k/(p*v), k%(p*v)
		c := r / p
		if !fwd {
			c = v - 1 - c
		}
		return unit{g*p + r%p, c, fwd}
	}
	warm := total
	if m != p {
		warm = min((p-s-1)*2+(v-1)*p, total)
	}
	for k := 0; k < warm; k++ {
		out = append(out, at(k, true))
	}
	for k := 0; k < total-warm; k++ {
		out = append(out, at(warm+k, true), at(k, false))
	}
	for k := total - warm; k < total; k++ {
		out = append(out, at(k, false))
	}
	return out
}

// Schedule builds every stage's program for pp stages, ga microbatches and
// vpp model chunks per stage, and merges them into one step list in which
// each stage's steps keep their order and every PP transfer comes before
// the wait that receives it. Activations move between neighbouring
// (virtual) stages as SendRecv of PPComm bytes; weight-gradient
// collectives are issued on each stage's last microbatch, beside the
// backward compute that follows them, and joined at the iteration's end;
// the bubble is what the dependencies leave idle.
func (m *AICB) Schedule(pp, ga, vpp int) ([]Step, error) {
	return m.ScheduleLimit(pp, ga, vpp, 0)
}

// StepBytes is what a scheduled step holds until its flows are written:
// the step and its label, its Coll and the merge's copy. Measured as live
// heap over steps of simccl-decompose on 16 GPUs: 712 B for 200,000
// compute-only lines, 915 B for a 4-stage pipeline at --ga 10000, 1.08 KB
// for 2,000 lines of two AllReduces at flow granularity; the least of
// them, since a guard that stops a run that fits is worse than none.
// (Peak RSS is higher by the collector's slack, which simccl-decompose
// bounds with the memory limit it gives the runtime.)
const StepBytes = 700

// ScheduleLimit is Schedule that counts the steps first, holding nothing,
// and refuses a schedule past limit bytes (0: no bound) in a moment
// instead of dying for want of memory once built.
func (m *AICB) ScheduleLimit(pp, ga, vpp int, limit int64) ([]Step, error) {
	if m.Policy == "MICRO" {
		// SimAI's micro benchmark issues each layer's weight-gradient collective.
		var steps []Step
		for k, L := range m.Layers {
			if L.HasWG {
				s := L.WGC
				s.Label = fmt.Sprintf("%s/%d/wg", L.Name, k)
				s.Layer, s.LayerName, s.Phase, s.Microbatch = int32(k), L.Name, "wg", -1
				steps = append(steps, s)
			}
		}
		return steps, nil
	}
	switch {
	case pp < 1:
		return nil, &FieldError{"pp", fmt.Errorf("%d stages: needs at least 1", pp)}
	case ga < 1:
		return nil, &FieldError{"ga", fmt.Errorf("%d microbatches: needs at least 1", ga)}
	case vpp < 1:
		return nil, &FieldError{"vpp", fmt.Errorf("%d model chunks per stage: needs at least 1", vpp)}
	case vpp > 1 && pp == 1:
		vpp = 1 // interleaving needs a pipeline; Megatron ignores it too
	case vpp > 1 && ga%pp != 0:
		return nil, &FieldError{"ga", fmt.Errorf("the interleaved schedule needs the microbatches (%d) to be a multiple of the pipeline stages (%d), as Megatron-LM does", ga, pp)}
	}
	// Each stage runs every line's few steps per microbatch: refuse
	// programs no machine holds before building them.
	if steps := int64(pp) * int64(ga) * int64(max(len(m.Layers), 1)) * 6; steps > maxScheduleSteps {
		return nil, &FieldError{"ga", fmt.Errorf("%d microbatches on %d stages of %d lines make about %d steps, beyond the %d this program schedules", ga, pp, len(m.Layers), steps, maxScheduleSteps)}
	}
	if limit > 0 {
		_, n, err := m.build(pp, ga, vpp, true)
		if err != nil {
			return nil, err
		}
		if need := n * StepBytes; need > limit {
			field, what := "ga", "lower --ga"
			if ga == 1 {
				field, what = "layers", "simulate fewer layers"
			}
			return nil, &FieldError{field, fmt.Errorf("%d microbatches on %d stages of %d lines make %d steps, about %s in memory (%d B a step), beyond the %s this machine has (FABRICSIM_MEMORY sets it): %s",
				ga, pp, len(m.Layers), n, units.HumanSize(need), StepBytes, units.HumanSize(limit), what)}
		}
	}
	progs, _, err := m.build(pp, ga, vpp, false)
	if err != nil {
		return nil, err
	}
	return mergePrograms(progs)
}

// build writes every stage's program, or with count only counts the
// steps (the total, held or not).
func (m *AICB) build(pp, ga, vpp int, count bool) ([][]Step, int64, error) {
	pre, post, blocks := m.split()
	starts := m.layerStarts(blocks[0][0], blocks[0][1])
	if len(starts) < vpp || len(starts)%vpp != 0 {
		return nil, 0, &FieldError{"vpp", fmt.Errorf("%d model chunks do not divide the %d layers each stage runs per microbatch", vpp, len(starts))}
	}
	// chunk c of a block spans these line offsets from the block's start.
	bounds := make([]int, vpp+1)
	for c := 0; c < vpp; c++ {
		bounds[c] = starts[c*len(starts)/vpp] - blocks[0][0]
	}
	bounds[vpp] = blocks[0][1] - blocks[0][0]
	b := &scheduler{m: m, pp: pp, ga: ga, vpp: vpp, count: count}
	progs := make([][]Step, pp)
	hint := 6 * len(m.Layers) // a stage's steps: few per line (stages are alike: then the last one's)
	for s := 0; s < pp; s++ {
		if s > 0 {
			hint = len(progs[s-1])
		}
		if count {
			hint = 0
		}
		b.prog, b.stage, b.wg = make([]Step, 0, hint), s, nil
		for k := pre[0]; k < pre[1]; k++ {
			b.forward(k, -1)
		}
		for _, u := range pipelineOrder(s, pp, ga, vpp) {
			blk := blocks[u.mb%len(blocks)] // a --ga beyond the file's copies runs them again
			lo, hi := blk[0]+bounds[u.chunk], blk[0]+bounds[u.chunk+1]
			vs := u.chunk*pp + s
			if u.fwd {
				if vs > 0 {
					b.recv("f", u.mb, vs)
				}
				for k := lo; k < hi; k++ {
					b.forward(k, u.mb)
				}
				if vs < pp*vpp-1 {
					b.send("f", u.mb, vs, vs+1)
				}
				continue
			}
			if vs < pp*vpp-1 {
				b.recv("b", u.mb, vs)
			}
			for k := hi - 1; k >= lo; k-- {
				b.backward(k, u.mb, u.mb == ga-1)
			}
			if vs > 0 {
				b.send("b", u.mb, vs, vs-1)
			}
		}
		for k := post[0]; k < post[1]; k++ {
			b.forward(k, -1)
		}
		for k := post[1] - 1; k >= post[0]; k-- {
			b.backward(k, -1, true)
		}
		for k := pre[1] - 1; k >= pre[0]; k-- {
			b.backward(k, -1, true)
		}
		for _, tag := range b.wg {
			b.add(Step{Wait: tag})
		}
		progs[s] = b.prog
	}
	return progs, b.n, nil // every stage's
}

// scheduler writes one stage's program.
type scheduler struct {
	m           *AICB
	count       bool  // only count the steps (n), keep none
	n           int64 // steps, counted or kept
	pp, ga, vpp int
	stage       int
	prog        []Step
	wg          []string // weight-gradient tags to join at the end
}

func (b *scheduler) add(s Step) {
	if b.n++; b.count {
		return
	}
	s.Staged, s.Stage = true, b.stage
	b.prog = append(b.prog, s)
}

// label names line k's phase, with the microbatch when there are several.
func (b *scheduler) label(k int, phase string, mb int) string {
	if mb >= 0 && b.ga > 1 {
		return fmt.Sprintf("%s/%d/%s/mb%d", b.m.Layers[k].Name, k, phase, mb)
	}
	return fmt.Sprintf("%s/%d/%s", b.m.Layers[k].Name, k, phase)
}

func (b *scheduler) at(s Step, k int, phase string, mb int) Step {
	if b.count {
		return s // counted, not kept: no label to format
	}
	s.Layer, s.LayerName, s.Phase, s.Microbatch = int32(k), b.m.Layers[k].Name, phase, int32(mb)
	s.Label = b.label(k, phase, mb)
	return s
}

func (b *scheduler) forward(k, mb int) {
	L := b.m.Layers[k]
	if L.Fwd > 0 {
		b.add(b.at(Step{ComputePs: L.Fwd}, k, "fwd", mb))
	}
	if L.HasFwd {
		b.add(b.at(L.FwdC, k, "fwd", mb))
	}
}

// backward runs line k's input-gradient compute and collective (joined
// after the weight-gradient compute, which it overlaps, as SimAI's loop
// does), then its weight-gradient compute and, on the last microbatch,
// its weight-gradient collective, left running to the end.
func (b *scheduler) backward(k, mb int, last bool) {
	L := b.m.Layers[k]
	if L.IG > 0 {
		b.add(b.at(Step{ComputePs: L.IG}, k, "ig", mb))
	}
	ig := ""
	if L.HasIG && k > 0 {
		ig = fmt.Sprintf("ig/%d/%d/%d", b.stage, mb, k)
		s := b.at(L.IGC, k, "ig", mb)
		s.Async, s.Tag = true, ig
		b.add(s)
	}
	if L.WG > 0 {
		b.add(b.at(Step{ComputePs: L.WG}, k, "wg", mb))
	}
	if L.HasWG && last {
		tag := fmt.Sprintf("wg/%d/%d/%d", b.stage, mb, k)
		s := b.at(L.WGC, k, "wg", mb)
		s.Async, s.Tag = true, tag
		b.add(s)
		b.wg = append(b.wg, tag)
	}
	if ig != "" {
		b.add(Step{Wait: ig})
	}
}

// ppTag names the transfer of microbatch mb's activation (dir f) or
// gradient (dir b) into virtual stage vs.
func ppTag(dir string, mb, vs int) string { return fmt.Sprintf("pp/%s/%d/%d", dir, mb, vs) }

func (b *scheduler) recv(dir string, mb, vs int) { b.add(Step{Wait: ppTag(dir, mb, vs)}) }

func (b *scheduler) send(dir string, mb, from, to int) {
	what := "activation"
	if dir == "b" {
		what = "gradient"
	}
	b.add(Step{Op: nccl.SendRecv, Size: b.m.PPComm, Group: PP, Peer: to % b.pp, Tag: ppTag(dir, mb, to),
		Phase: "pp", Layer: -1, Microbatch: int32(mb),
		Label: fmt.Sprintf("pp/%s/mb%d/vstage%d-%d", what, mb, from, to)})
}

// mergePrograms interleaves the stages' programs: each stage runs as far
// as it can, stopping at a wait for a PP transfer not yet sent.
func mergePrograms(progs [][]Step) ([]Step, error) {
	sent := map[string]bool{}
	next := make([]int, len(progs))
	left := 0
	for _, p := range progs {
		left += len(p)
	}
	out := make([]Step, 0, left)
	for left > 0 {
		moved := false
		for s, p := range progs {
			for next[s] < len(p) {
				st := p[next[s]]
				if strings.HasPrefix(st.Wait, "pp/") && !sent[st.Wait] {
					break
				}
				if st.Group == PP && st.Tag != "" {
					sent[st.Tag] = true
				}
				out = append(out, st)
				next[s]++
				left--
				moved = true
			}
		}
		if !moved {
			return nil, fmt.Errorf("pipeline schedule waits in a cycle (a bug: stage programs %v stuck)", next)
		}
	}
	return out, nil
}
