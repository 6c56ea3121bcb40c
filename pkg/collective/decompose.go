package collective

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/units"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// Coll is one planned collective: its record, its group and its plan.
type Coll struct {
	Rec       stream.Collective
	GroupType string
	Ranks     []int32
	Plan      Plan
	Step      int
	Compute   bool  // a compute phase's pseudo-collective
	Flows     int64 // filled by Emit
	WireBytes int64 // filled by Emit
	// time: its COLL node's at collective granularity (slowestSibling;
	// zero: emitColl finds it)
	time collTime
}

// collTime is a COLL node's time (ps) and its fill: the part of it that a
// link beyond the NICs carrying its bytes idles through (its first
// piece's latencies), when its bytes go beside its pace, not after it (a
// tree's pieces); 0: the fabric's extra adds to the time. The collective
// record carries the fill (stream.Collective.FabricLatPs), lock, an LL or
// LL128 ring's NVLink pace (ringPathPs; Cut.NVLinkLockPs), and conn, its
// network connection's own steps in order (Cut.RingConnPs).
type collTime struct{ ps, fill, lock, conn int64 }

// Decomposer turns a workload into groups, collectives and flows.
type Decomposer struct {
	Fabric  Fabric
	Layout  Layout
	Planner *Planner
	// Collectives: collective granularity. One rank per pipeline stage
	// (its first) stands for every rank of the stage, each collective other
	// than a pipeline transfer is one COLL node on it, and only its group's
	// collectives are planned and written; every group is still listed
	// (formats/stream.md).
	Collectives bool
	// MemoryLimit bounds what Prepare's Colls and the steps may hold
	// (0: no bound); see checkMemory.
	MemoryLimit int64
	// Stragglers: ranks whose compute is slowed or whose start is late
	// (straggler.go).
	Stragglers Stragglers

	sets   map[string]*groupSet // by group type
	groups []stream.Group
	stages map[int][]int32 // ranks of each pipeline stage, -1: all
	// stageFactor: the straggler factor of each stage's representative
	// at collective granularity, -1: all
	stageFactor map[int]float64
	// priced: slowestSibling's COLL node times by plan and shape
	priced map[shapeKey]collTime
}

// groupSet is every group of one type: ranks, stream ids and how many
// servers each spans.
type groupSet struct {
	ranks [][]int32
	ids   []int64
	nodes []int
	// uneven: the group's servers hold different numbers of its ranks
	// (unevenNodes: no NVLS)
	uneven []bool
	of     map[int32]int // the group of each rank (its first, if several)
	// shape: each group's ranks per server, in the order nodesOf lists
	// its servers (shapeOf)
	shape []string
	// stage: stageShapes' answers by group
	stage map[int]sibling
}

// sibling is stageShapes' answer: the first group of each distinct shape
// among a stage's groups, and whether any of them is uneven.
type sibling struct {
	gis    []int
	uneven bool
}

// NewDecomposer checks the layout against the fabric. A job on fewer GPUs
// than the fabric has runs on those its placement names (Layout.Place;
// without one, GPUs 0..World-1); the fabric learns which (Fabric.Job).
func NewDecomposer(f Fabric, l Layout, p *Planner) (*Decomposer, error) {
	if l.World() > f.GPUs {
		return nil, fmt.Errorf("parallelism covers %d ranks, the topology has %d GPUs", l.World(), f.GPUs)
	}
	if l.Place != nil && l.PlacedGPUs() != f.GPUs {
		return nil, fmt.Errorf("the placement was made for %d GPUs, the topology has %d", l.PlacedGPUs(), f.GPUs)
	}
	f.Job = l.Member(f.GPUs)
	return &Decomposer{Fabric: f, Layout: l, Planner: p, sets: map[string]*groupSet{}}, nil
}

// groupsOf returns a type's groups, registering them on first use.
func (d *Decomposer) groupsOf(kind string) (*groupSet, error) {
	if gs := d.sets[kind]; gs != nil {
		return gs, nil
	}
	ranks, err := d.Layout.Groups(kind)
	if err != nil {
		return nil, err
	}
	gs := &groupSet{ranks: ranks, ids: make([]int64, len(ranks)), nodes: make([]int, len(ranks)), uneven: make([]bool, len(ranks)), shape: make([]string, len(ranks)), of: map[int32]int{}}
	for i, g := range ranks {
		for _, r := range g {
			if _, ok := gs.of[r]; !ok {
				gs.of[r] = i
			}
		}
		gs.ids[i] = int64(len(d.groups))
		nodes := d.Fabric.nodesOf(g)
		gs.nodes[i], gs.uneven[i], gs.shape[i] = len(nodes), unevenNodes(nodes), shapeOf(nodes)
		d.groups = append(d.groups, stream.Group{ID: gs.ids[i], Type: kind, Ranks: g})
	}
	if d.Collectives {
		// PP groups too: the representatives' group (one rank per stage)
		// stands for every other in the pipeline transfers the stream holds.
		d.markSiblings(gs, len(d.groups)-len(ranks))
	}
	d.sets[kind] = gs
	return gs, nil
}

// markSiblings writes, on each group holding a stage's representative (the
// groups COLL flows name), the ids of the other groups of its type in that
// stage: they run its collectives at the same time, and a backend pricing
// the fabric loads the links with all of them (a PP group, whose first rank
// is in stage 0, lists every other PP group). first is the index of the
// type's first group in d.groups.
func (d *Decomposer) markSiblings(gs *groupSet, first int) {
	per := int32(d.Layout.TP * d.Layout.DP)
	byStage := map[int][]int64{}
	for i, g := range gs.ranks {
		st := d.stageOf(g[0])
		byStage[st] = append(byStage[st], gs.ids[i])
	}
	for i, g := range gs.ranks {
		rep := slices.ContainsFunc(g, func(r int32) bool { return int32(d.Layout.Rank(r))%per == 0 })
		if !rep {
			continue
		}
		for _, id := range byStage[d.stageOf(g[0])] {
			if id != gs.ids[i] {
				d.groups[first+i].Siblings = append(d.groups[first+i].Siblings, id)
			}
		}
	}
}

// Groups lists the groups the prepared workload uses.
func (d *Decomposer) Groups() []stream.Group { return d.groups }

// stageRanks returns the ranks of pipeline stage st (every rank for a
// step that is not staged), one shared slice per stage.
func (d *Decomposer) stageRanks(s Step) []int32 {
	key := -1
	if s.Staged {
		key = s.Stage
	}
	if d.stages == nil {
		d.stages = map[int][]int32{}
	}
	if r, ok := d.stages[key]; ok {
		return r
	}
	per := d.Layout.TP * d.Layout.DP
	lo, hi := 0, d.Layout.World()
	if key >= 0 {
		lo, hi = key*per, (key+1)*per
	}
	if d.Collectives {
		hi = lo + 1 // the stage's representative
	}
	r := make([]int32, 0, hi-lo)
	for i := lo; i < hi; i++ {
		r = append(r, d.Layout.GPU(i))
	}
	d.stages[key] = r
	return r
}

// stageOf is the pipeline stage of the rank on GPU r.
func (d *Decomposer) stageOf(r int32) int { return d.Layout.Rank(r) / (d.Layout.TP * d.Layout.DP) }

// record fills a collective record's place in the iteration from its step.
func record(rec stream.Collective, s Step) stream.Collective {
	rec.Layer, rec.Microbatch, rec.Stage = -1, -1, -1
	if s.Phase != "" {
		rec.Layer, rec.LayerName, rec.Phase, rec.Microbatch = s.Layer, s.LayerName, s.Phase, s.Microbatch
	}
	if s.Staged {
		rec.Stage = int32(s.Stage)
	}
	return rec
}

// Prepare plans every collective of the workload, in emission order. Each
// compute step becomes a pseudo-collective (op compute, group -1) whose
// delay nodes the trace ties to its layer, phase and microbatch. At
// collective granularity it also numbers the flows flow granularity would
// write (numbering), to give each collective's cut the id of its first.
func (d *Decomposer) Prepare(w *Workload) ([]Coll, error) {
	colls, err := d.checkMemory(w)
	if err != nil {
		return nil, err
	}
	out := make([]Coll, 0, colls)
	n := numbering{steps: map[stepKey][2]int64{}}
	for _, ps := range d.Stragglers.StartPs {
		if ps > 0 {
			n.next++ // flow granularity's late-start delay nodes come first
		}
	}
	cache := map[planKey]Plan{}
	for si, s := range w.Steps {
		if s.Staged && (s.Stage < 0 || s.Stage >= d.Layout.PP || (s.Group == PP && (s.Peer < 0 || s.Peer >= d.Layout.PP))) {
			return nil, fmt.Errorf("step %q runs on pipeline stage %d of %d", s.Label, s.Stage, d.Layout.PP)
		}
		switch {
		case s.Barrier:
			if n.next > 0 {
				n.next++ // Emit's join of every rank's last flows
			}
			continue
		case s.Wait != "":
			continue
		case s.ComputePs > 0:
			id := int64(len(out))
			out = append(out, Coll{Rec: record(stream.Collective{ID: id, Op: stream.OpCompute, Group: -1, Label: s.Label}, s),
				Ranks: d.stageRanks(s), Step: si, Plan: Plan{NoOp: true}, Compute: true})
			ranks := d.Layout.World() // a delay node per rank of the stage (or of all)
			if s.Staged {
				ranks = d.Layout.TP * d.Layout.DP
			}
			n.next += int64(ranks)
			continue
		}
		gs, err := d.groupsOf(s.Group)
		if err != nil {
			return nil, fmt.Errorf("step %q: %v", s.Label, err)
		}
		groups := gs.ranks
		lo := 0
		first := int64(-1) // the id of the first flow of the group planned here
		if d.Collectives {
			// Only the group of the stage's representative.
			rep := d.stageRanks(s)[0]
			if s.Group == PP && s.Staged {
				rep = d.stageRanks(Step{Staged: true, Stage: 0})[0] // PP groups hold one rank per stage
			}
			gi, ok := gs.of[rep]
			if !ok {
				gi = -1
			}
			if first, err = d.number(&n, s, gs, gi, cache); err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			groups, lo = gs.ranks[gi:gi+1], gi
		}
		for k, ranks := range groups {
			gi := lo + k
			if ranks = d.stepRanks(s, gs, gi); ranks == nil {
				continue
			}
			var pl Plan
			var tm collTime
			if d.Collectives && s.Group != PP {
				var pi int // the group planned and priced
				pi, pl, tm, err = d.slowestSibling(cache, s, gs, gi)
				ranks = gs.ranks[pi]
			} else {
				pl, err = d.plan(cache, s, gs, gi, ranks, gs.uneven[gi])
			}
			if err != nil {
				return nil, err
			}
			cut := d.cutRecord(pl, s.Op)
			if cut != nil && first >= 0 {
				cut.FirstFlow = &first
			}
			id := int64(len(out))
			out = append(out, Coll{
				Rec: record(stream.Collective{ID: id, Op: string(s.Op), Size: s.Size, Group: gs.ids[gi], Algorithm: pl.Algo.String(),
					Protocol: pl.Proto.String(), Channels: pl.Channels, PXN: pl.PXN, PredictedPs: usToPs(pl.PredictedUs), Label: s.Label,
					Cut: cut, SendLatPs: d.sendLat(pl), FabricLatPs: tm.fill}, s),
				GroupType: s.Group, Ranks: ranks, Plan: pl, Step: si, time: tm,
			})
			if cut != nil { // collective granularity: priced with its time
				cut.NVLinkLockPs, cut.RingConnPs = tm.lock, tm.conn
			}
		}
	}
	return out, nil
}

// CollBytes is what a Coll holds (measured live: 375 B, its record's
// strings included); StepBytes counts the one of a compute step.
const CollBytes = 350

// checkMemory counts the Colls Prepare will make, one per compute step
// and, at flow granularity, one per group a collective step runs on (a
// TP AllReduce on 9216 GPUs at TP 2 is 4608), and refuses a workload
// whose steps and Colls would hold more than MemoryLimit. Counting holds
// nothing: the group counts are per group type and stage.
func (d *Decomposer) checkMemory(w *Workload) (int, error) {
	type key struct {
		group string
		stage int // -1: every group
	}
	per := map[key]int{}
	colls := 0
	for _, s := range w.Steps {
		switch {
		case s.Barrier || s.Wait != "":
			continue
		case s.ComputePs > 0 || d.Collectives:
			colls++
			continue
		}
		k := key{s.Group, -1}
		if s.Staged && s.Group != PP {
			k.stage = s.Stage
		}
		n, ok := per[k]
		if !ok {
			gs, err := d.groupsOf(s.Group)
			if err != nil {
				return 0, nil // Prepare says what is wrong with the step
			}
			for _, ranks := range gs.ranks {
				if k.stage < 0 || d.stageOf(ranks[0]) == k.stage {
					n++
				}
			}
			per[k] = n
		}
		colls += n
	}
	if d.MemoryLimit <= 0 {
		return colls, nil
	}
	if need := int64(len(w.Steps))*(workload.StepBytes-CollBytes) + int64(colls)*CollBytes; need > d.MemoryLimit {
		return 0, fmt.Errorf("the workload's %d steps make %d collectives on %d GPUs (one per group at flow granularity), about %s in memory, beyond the %s this machine has (FABRICSIM_MEMORY sets it): decompose with --granularity collective, or lower --ga or the layers",
			len(w.Steps), colls, d.Layout.World(), units.HumanSize(need), units.HumanSize(d.MemoryLimit))
	}
	return colls, nil
}

// planKey is what a collective's plan depends on.
type planKey struct {
	op       Op
	size     int64
	kind     string
	n, nodes int
	uneven   bool
}

// stepRanks is the ranks step s runs on in group gi of gs, nil if the
// group has no part in it: a PP transfer's sender and receiver, or a
// staged step's group when it is in the step's stage.
func (d *Decomposer) stepRanks(s Step, gs *groupSet, gi int) []int32 {
	ranks := gs.ranks[gi]
	if s.Staged {
		if s.Group == PP {
			return []int32{ranks[s.Stage], ranks[s.Peer]}
		} else if d.stageOf(ranks[0]) != s.Stage {
			return nil
		}
	}
	return ranks
}

// stageShapes is, for group gi's stage at collective granularity (gi and
// its siblings), the first group of each distinct shape (gi's first), and
// whether any of them is uneven: the COLL node's plan then has no NVLS,
// which such a sibling cannot run when the COLL node is expanded.
// Found once a group (a stage's hundreds of siblings, thousands of steps).
func (d *Decomposer) stageShapes(gs *groupSet, gi int) sibling {
	if w, ok := gs.stage[gi]; ok {
		return w
	}
	w := sibling{gis: []int{gi}, uneven: gs.uneven[gi]}
	for _, id := range d.groups[gs.ids[gi]].Siblings {
		i := int(id - gs.ids[0])
		if !slices.ContainsFunc(w.gis, func(j int) bool { return gs.shape[j] == gs.shape[i] }) {
			w.gis = append(w.gis, i)
		}
		w.uneven = w.uneven || gs.uneven[i]
	}
	if gs.stage == nil {
		gs.stage = map[int]sibling{}
	}
	gs.stage[gi] = w
	return w
}

// shapeOf is a group's shape: its ranks per server, in nodesOf's order.
// Groups of one shape are planned and priced alike.
func shapeOf(nodes [][]int) string {
	b := make([]byte, 0, 2*len(nodes))
	for _, l := range nodes {
		b = binary.AppendUvarint(b, uint64(len(l)))
	}
	return string(b)
}

// slowestSibling is the group a COLL node for group gi's stage is planned
// and priced on at collective granularity, its plan and its COLL node's
// time: of the stage's groups' distinct shapes (stageShapes), the one
// whose COLL node takes the longest (collPs), gi's on a tie. The stage's
// collective ends when its last group does, and groups not aligned to
// servers differ: --tp 6 on 8-GPU servers puts ranks 0-5 in one server
// and 6-11 across two (on a 1:1 k=16 fat-tree a 16 MiB ring AllReduce
// took 118 us priced on 0-5, 451 us as flows), and --tp 10 from GPU 2
// splits its groups 6 + 4, 4 + 6, 2 + 8 and 8 + 2, whose two GPUs' NICs
// carry every channel's crossings (357 us priced on 6 + 4, 518 as
// flows). Each shape's time is found once a step shape.
func (d *Decomposer) slowestSibling(cache map[planKey]Plan, s Step, gs *groupSet, gi int) (int, Plan, collTime, error) {
	st := d.stageShapes(gs, gi)
	best := -1
	var bestPl Plan
	var bestT collTime
	for _, i := range st.gis {
		pl, err := d.plan(cache, s, gs, i, gs.ranks[i], st.uneven)
		if err != nil {
			return 0, Plan{}, collTime{}, err
		}
		k := shapeKey{planKey{s.Op, s.Size, s.Group, len(gs.ranks[i]), gs.nodes[i], st.uneven}, gs.shape[i]}
		t, ok := d.priced[k]
		if !ok && !pl.NoOp {
			c := &Coll{Rec: stream.Collective{Op: string(s.Op), Size: s.Size, PredictedPs: usToPs(pl.PredictedUs)}, Ranks: gs.ranks[i], Plan: pl}
			t = d.collPs(c)
			if d.priced == nil {
				d.priced = map[shapeKey]collTime{}
			}
			d.priced[k] = t
		}
		if best < 0 || t.ps > bestT.ps {
			best, bestPl, bestT = i, pl, t
		}
	}
	return best, bestPl, bestT, nil
}

// shapeKey is what a COLL node's time on a group depends on: its plan's
// key and the group's shape.
type shapeKey struct {
	planKey
	shape string
}

// plan is step s's plan on group gi (ranks, from stepRanks), planned once
// per shape.
func (d *Decomposer) plan(cache map[planKey]Plan, s Step, gs *groupSet, gi int, ranks []int32, uneven bool) (Plan, error) {
	k := planKey{s.Op, s.Size, s.Group, len(ranks), gs.nodes[gi], uneven}
	if s.Group == PP && s.Staged {
		nodes := d.Fabric.nodesOf(ranks)
		k.nodes, k.uneven = len(nodes), unevenNodes(nodes)
	}
	pl, ok := cache[k]
	if !ok {
		var err error
		if pl, err = d.Planner.PlanOn(s.Op, s.Size, s.Group, ranks, k.uneven); err != nil {
			return Plan{}, fmt.Errorf("%s %s of %d bytes on %s: %v", s.Label, s.Op, s.Size, s.Group, err)
		}
		cache[k] = pl
	}
	return pl, nil
}

// numbering follows, at collective granularity, the ids Emit gives flows
// at flow granularity: next is the next one.
type numbering struct {
	next int64
	// steps: by step shape and the group asked for, the step's ids in all
	// (on every group Emit would cut it on) and the offset of that group's
	// first (-1: it takes no part).
	steps map[stepKey][2]int64
}

// stepKey is what a collective step's numbering depends on.
type stepKey struct {
	op          Op
	size        int64
	kind        string
	staged      bool
	stage, peer int
	gi          int
}

// number takes the ids collective step s would get at flow granularity
// (entry latency nodes, flows and joins on every group Emit cuts it on,
// in Emit's order) and returns the id of group gi's first (-1 if gi takes
// no part). Ring and NVLS channels are counted, not cut.
func (d *Decomposer) number(n *numbering, s Step, gs *groupSet, gi int, cache map[planKey]Plan) (int64, error) {
	key := stepKey{op: s.Op, size: s.Size, kind: s.Group, staged: s.Staged, gi: gi}
	if s.Staged {
		key.stage, key.peer = s.Stage, s.Peer
	}
	v, ok := n.steps[key]
	if !ok {
		v[1] = -1
		transfer := s.Group == PP && s.Staged
		for g := range gs.ranks {
			ranks := d.stepRanks(s, gs, g)
			if ranks == nil {
				continue
			}
			pl, err := d.plan(cache, s, gs, g, ranks, gs.uneven[g])
			if err != nil {
				return 0, err
			}
			if g == gi {
				v[1] = v[0]
			}
			e := NewEmitter(nowhere{})
			c := &Coll{Rec: stream.Collective{Op: string(s.Op), Size: s.Size, Label: s.Label}, Ranks: ranks, Plan: pl}
			if _, err := d.emitGroup(e, c, d.cut(), transfer, true, func(int32) []int64 { return nil }); err != nil {
				return 0, err
			}
			v[0] += e.next
		}
		n.steps[key] = v
	}
	first := int64(-1)
	if v[1] >= 0 {
		first = n.next + v[1]
	}
	n.next += v[0]
	return first, nil
}

// NoOps counts the collectives that move nothing (1-rank groups, 0 bytes)
// and all collectives, compute phases left out.
func NoOps(colls []Coll) (noop, all int) {
	for i := range colls {
		if colls[i].Compute {
			continue
		}
		all++
		if colls[i].Plan.NoOp {
			noop++
		}
	}
	return noop, all
}

// Emit writes the flows of the workload: compute phases as delay nodes,
// collectives decomposed by their plans, each rank's operations ordered by
// program order and, per communicator, by issue order. A PP transfer
// starts when its sender is ready; the sender waits for its delivery, the
// receiver joins it where its program waits for the transfer's tag.
func (d *Decomposer) Emit(w *Workload, colls []Coll, e *Emitter) error {
	e.sendLat = d.Planner.Opt.SendLatPs
	world := d.Fabric.GPUs // cursors by GPU id
	k := d.cut()
	cursor := make([][]int64, world)
	commCursor := map[string][][]int64{}
	pending := map[string]map[int32][]int64{} // per tag, what each rank waits for
	late, lateps := d.startNodes()
	for i, g := range late {
		cursor[g] = []int64{e.Delay(-1, g, lateps[i], nil)} // a straggler's late start
	}
	ci := 0
	for si, s := range w.Steps {
		switch {
		case s.ComputePs > 0:
			c := &colls[ci]
			ci++
			for _, r := range c.Ranks {
				cursor[r] = []int64{e.Delay(c.Rec.ID, r, d.computePs(s, r), cursor[r])}
			}
			c.Flows = int64(len(c.Ranks))
			continue
		case s.Barrier:
			var all []int64
			seen := map[int64]bool{}
			add := func(ids []int64) {
				for _, id := range ids {
					if !seen[id] {
						seen[id] = true
						all = append(all, id)
					}
				}
			}
			comms := slices.Sorted(maps.Keys(commCursor))
			for r := range cursor {
				add(cursor[r])
				for _, g := range comms {
					add(commCursor[g][r])
				}
			}
			if len(all) > 0 {
				j := []int64{e.Delay(-1, d.Layout.GPU(0), 0, all)}
				for r := range cursor {
					cursor[r] = j
				}
				for _, cc := range commCursor {
					for r := range cc {
						cc[r] = j
					}
				}
			}
			continue
		case s.Wait != "":
			if p, ok := pending[s.Wait]; ok {
				for r, ids := range p {
					cursor[r] = union(cursor[r], ids)
				}
				delete(pending, s.Wait)
			}
			continue
		}
		transfer := s.Group == PP && s.Staged
		cc := commCursor[s.Group]
		if cc == nil && !transfer {
			// PP transfers are not ordered per communicator: a stage's
			// sends and receives follow its program, not each other.
			cc = make([][]int64, world)
			commCursor[s.Group] = cc
		}
		var pend map[int32][]int64
		if s.Async || transfer {
			pend = pending[s.Tag]
			if pend == nil {
				pend = map[int32][]int64{}
				pending[s.Tag] = pend
			}
		}
		for ; ci < len(colls) && colls[ci].Step == si; ci++ {
			c := &colls[ci]
			if d.Collectives && !transfer {
				d.emitColl(e, c, d.stageRanks(s)[0], cursor, cc, s.Async, pend)
				continue
			}
			f0, b0 := e.Flows, e.WireBytes
			exits, err := d.emitGroup(e, c, k, transfer, false, func(r int32) []int64 {
				if cc != nil {
					return union(cursor[r], cc[r])
				}
				return cursor[r]
			})
			if err != nil {
				return err
			}
			c.Flows, c.WireBytes = e.Flows-f0, e.WireBytes-b0
			for p, r := range c.Ranks {
				switch {
				case transfer && p == 1:
					pend[r] = union(pend[r], exits[p])
					continue
				case s.Async:
					pend[r] = union(pend[r], exits[p])
				default:
					cursor[r] = exits[p]
				}
				if cc != nil {
					cc[r] = exits[p]
				}
			}
			if err := e.Err(); err != nil {
				return err
			}
		}
	}
	return e.Err()
}

// emitGroup writes collective c on its group at flow granularity: each
// rank's entry (what wait returns for it, then NCCL's base latency on a
// delay node), the flows, and the joins that end the ranks' parts; it
// returns what each rank's next operation waits for. A PP transfer's
// receiver (transfer, position 1) starts when the data arrives. count
// only numbers the flows: ring and NVLS channels advance the ids by
// their flow count without making the flows (cctx.count).
func (d *Decomposer) emitGroup(e *Emitter, c *Coll, k cut, transfer, count bool, wait func(r int32) []int64) ([][]int64, error) {
	entry := make([][]int64, len(c.Ranks))
	lat := d.Planner.Opt.LaunchLatency
	// A process driving several GPUs launches the collective on each in
	// turn: its ranks are done no sooner than the launches (launchFloorPs).
	floor := d.Planner.Opt.launchFloorPs()
	if transfer || c.Plan.NoOp {
		floor = 0
	}
	launched := make([]int64, len(c.Ranks))
	for p, r := range c.Ranks {
		if transfer && p == 1 {
			if c.Plan.NoOp {
				entry[p] = entry[0] // nothing moves: the receiver still waits for the sender
			}
			continue // the receiver's side starts when the data arrives
		}
		entry[p] = wait(r)
		if floor > 0 {
			launched[p] = e.Delay(c.Rec.ID, r, floor, entry[p])
		}
		if lat && c.Plan.Lat.Base > 0 {
			entry[p] = []int64{e.Delay(c.Rec.ID, r, usToPs(c.Plan.Lat.Base), entry[p])}
		}
	}
	ctx := newCtx(e, d.Fabric, c.Rec.ID, c.Ranks, entry)
	ctx.count = count
	if lat {
		ctx.intra, ctx.inter = usToPs(c.Plan.Lat.Intra), usToPs(c.Plan.Lat.Inter)
	}
	ctx.step = d.Planner.Opt.collCosts(c.Plan, Op(c.Rec.Op))
	if err := decompose(ctx, c, k); err != nil {
		return nil, fmt.Errorf("collective %d (%s): %v", c.Rec.ID, c.Rec.Label, err)
	}
	if floor > 0 {
		for p := range c.Ranks {
			ctx.exit[p] = append(ctx.exit[p], launched[p])
		}
	}
	return ctx.finish(), nil
}

// emitColl writes collective c at collective granularity: one COLL node
// on rep, the rank standing for its stage, taking collPs (a join when
// nothing moves), ordered as a rank's part of it would be.
func (d *Decomposer) emitColl(e *Emitter, c *Coll, rep int32, cursor, cc [][]int64, async bool, pend map[int32][]int64) {
	entry := cursor[rep]
	if cc != nil {
		entry = union(entry, cc[rep])
	}
	var id int64
	if c.Plan.NoOp {
		id = e.Delay(c.Rec.ID, rep, 0, entry)
	} else {
		t := c.time
		if t.ps == 0 {
			t = d.collPs(c)
		}
		id = e.Coll(c.Rec.ID, rep, c.Rec.Size, max(t.ps, 1), entry)
	}
	exit := []int64{id}
	if async {
		pend[rep] = union(pend[rep], exit)
	} else {
		cursor[rep] = exit
	}
	if cc != nil {
		cc[rep] = exit
	}
	c.Flows = 1
}

// collPs is collective c's COLL node time (ps): NCCL's model time plus the
// transport's per-step costs in closed form, as flow granularity's
// transfers carry them; for a queued ring, an NVLS-Tree or a tree
// AllReduce under the transport's costs, the mechanism's own closed form
// (linktime.go) instead.
func (d *Decomposer) collPs(c *Coll) collTime {
	nNodes := len(d.Fabric.nodesOf(c.Ranks))
	t := c.Rec.PredictedPs + transportPs(c, d.cut(), d.Planner.Opt.collCosts(c.Plan, Op(c.Rec.Op)), nNodes, ncclBwPs(c))
	var fill, lock, conn int64
	bw := ncclBwPs(c)
	if d.Planner.Opt.CollTime == CollTimeLinks {
		// The flows' mechanism instead of NCCL's bandwidth: the same
		// latencies, the bytes at the links' rates (linkBwPs).
		if lb, ok := d.linkBwPs(c); ok {
			bw = lb
			t = usToPs(c.Plan.Lat.Total) + bw + transportPs(c, d.cut(), d.Planner.Opt.collCosts(c.Plan, Op(c.Rec.Op)), nNodes, bw)
		}
	}
	if s := d.Planner.Opt.collCosts(c.Plan, Op(c.Rec.Op)); queuedRing(c, s) {
		// Its connections' step cycle in closed form (ringCyclePs).
		if phase, ok := d.ringPhasePs(c); ok {
			// Its busiest link's bytes bound it too: NCCL's bandwidth
			// takes the group's NICs evenly over its servers, but a
			// server holding fewer of its ranks (2 + 4) sends its
			// channels' crossings over fewer NICs.
			if lb, ok := d.linkBwPs(c); ok {
				bw = max(bw, lb)
			}
			t = ringCyclePs(c, d.cut(), s, nNodes, phase, bw)
		}
	} else if at, ok := d.allToAllPs(c, s, nNodes); ok {
		t = at // its network connections' steps in closed form
	} else if rt, lk, cn, ok := d.ringPathPs(c, d.cut(), s, nNodes, bw); ok {
		t, lock, conn = rt, lk, cn // an LL or LL128 ring's diagonal in closed form
	} else if nt, ok := d.nvlsTreePs(c, s, nNodes); ok {
		t = nt // its stages' chain and cycle in closed form
	} else if c.Plan.Algo == AlgoTree && (s.intra > 0 || s.inter > 0) {
		// Its pieces' pipeline along the tree in closed form, its bytes
		// at the links' rates as the flows move them.
		if busy, ok := d.busiestLinksPs(c, false); ok {
			if tt, ok := d.treeTimes(c, s, busy); ok {
				t, fill = tt.ps, tt.fill
			}
		}
	}
	// A process driving several GPUs: no sooner than its launches.
	return collTime{ps: max(t, d.Planner.Opt.launchFloorPs()), fill: fill, lock: lock, conn: conn}
}

// usToPs converts the model's microseconds to the stream's picoseconds.
func usToPs(us float64) int64 { return int64(math.Round(us * 1e6)) }

// cut is what cutting one collective into flows depends on beyond its
// plan: the fabric, the --max-chunks cap, NVLS's share of NVLink rate and
// a user's MSCCL schedule. simccl-decompose takes it from its planner, a
// backend expanding a COLL node from the collective record (expand.go).
type cut struct {
	f         Fabric
	maxChunks int
	nvlsEff   float64
	msccl     *MSCCLAlgo
}

// cut is the decomposer's own.
func (d *Decomposer) cut() cut {
	return cut{f: d.Fabric, maxChunks: d.Planner.Opt.MaxChunks, nvlsEff: nccl.NVLSEfficiency(d.Planner.M.CC), msccl: d.Planner.MSCCL}
}

// chunk is the bytes per channel and pipeline step of a plan that moves
// unitsPerLoop chunks per loop, raised so that a channel takes at most the
// cap's loops.
func (co *Coll) chunk(unitsPerLoop int, k cut) int64 {
	pl := co.Plan
	channels := max(pl.Channels, 1)
	c := pl.Chunk
	m := int64(k.maxChunks)
	if pl.Algo == AlgoNVLS || pl.Algo == AlgoNVLSTree {
		// An NVLS chunk's phases (load-reduce, then multicast) follow
		// each other on every GPU at once instead of pipelining across
		// ranks as a ring's steps do, so filling and draining cost a
		// whole chunk: four times the chunks keep that near 1.5%.
		m *= 4
	}
	if m > 0 {
		per := (co.Rec.Size + int64(channels) - 1) / int64(channels)
		c = max(c, (per+int64(unitsPerLoop)*m-1)/(int64(unitsPerLoop)*m))
	}
	return c
}

// nvlsTreeChunk is an NVLS-Tree channel's chunk. Without the transport's
// costs it is NCCL's per-head chunk, cut finer than NCCL does so that the
// DAG's pipeline fills as fast as NCCL's model time assumes. With them
// (steps: the transport's step costs apply) it is NCCL's loop, as the
// per-step costs are paid per NCCL step: enqueue.cc's calcCollChunking
// gives each of a channel's nHeads (ppn) heads a chunk of nvlsChunkSize
// (pl.Chunk: 128 KiB, 64 KiB from 4 servers, or Transport.NVLSChunk),
// cut to 256 KiB while nBytes < 32 x concurrentOps x chunk, 128 KiB
// while < 16 x, 64 KiB while < 4 x and 32 KiB while nBytes <
// concurrentOps x chunk (concurrentOps = channels x nHeads), and a loop
// moves nHeads chunks per channel, each head's chunk one network step of
// the tree. The cap on chunks per channel (chunk) applies to the loop.
func (co *Coll) nvlsTreeChunk(k cut, steps bool) int64 {
	if !steps {
		return co.chunk(1, k)
	}
	pl := co.Plan
	channels := int64(max(pl.Channels, 1))
	ppn := int64(len(co.Ranks) / max(len(k.f.nodesOf(co.Ranks)), 1))
	ops, size, ck := channels*ppn, co.Rec.Size, pl.Chunk
	if size < 32*ops*ck && ck > 256<<10 {
		ck = 256 << 10
	}
	if size < 16*ops*ck && ck > 128<<10 {
		ck = 128 << 10
	}
	if size < 4*ops*ck && ck > 64<<10 {
		ck = 64 << 10
	}
	if size < ops*ck && ck > 32<<10 {
		ck = 32 << 10
	}
	loop := ck * ppn
	if m := 4 * int64(k.maxChunks); m > 0 {
		per := (size + channels - 1) / channels
		loop = max(loop, (per+m-1)/m)
	}
	return loop
}

// treeChunk is a tree AllReduce's chunk per channel and how many of them
// share one NCCL step (cctx.stepDiv). LL and LL128 pass each line on as
// it lands, so a tree node forwards before a whole chunk has arrived; the
// DAG forwards whole chunks, so it cuts a channel into at least eight to
// keep that store-and-forward an eighth of a chunk per hop, and the pieces
// of one NCCL step share its cost. A channel's bytes that fit one step
// stand for its eighths whatever the cut: under 512 bytes it is cut into
// fewer pieces (64 bytes at least), and a size not a multiple of 8 rounds
// to 7 pieces' worth, yet its first line is forwarded after an eighth of
// the step's cost (with a piece a step, 8-64 B took 60 us on 4 x 8 H100s
// where 512 B took 39 and Voltage Park measured 37-38 throughout).
func (co *Coll) treeChunk(k cut) (ck, div int64) {
	ck, div = co.chunk(1, k), 0
	if co.Plan.Proto != Simple {
		channels := int64(max(co.Plan.Channels, 1))
		per := (co.Rec.Size + channels - 1) / channels
		nccl := min(ck, per)
		ck = min(ck, max(64, (per+7)/8))
		div = max(1, nccl/ck)
		if nccl == per {
			div = 8
		}
	}
	return ck, div
}

// ringSpec is the collective as a ring runs it.
func (co *Coll) ringSpec(k cut) ringSpec {
	pl := co.Plan
	return ringSpec{op: Op(co.Rec.Op), size: co.Rec.Size, channels: max(pl.Channels, 1), chunk: co.chunk(len(co.Ranks), k), proto: pl.Proto, pxn: pl.PXN}
}

func decompose(c *cctx, co *Coll, k cut) error {
	pl := co.Plan
	if pl.NoOp {
		// Nothing moves; a join per rank keeps the collective in the trace.
		for p, r := range c.ranks {
			c.exit[p] = []int64{c.e.Delay(c.id, r, 0, c.entry[p])}
		}
		return nil
	}
	op := Op(co.Rec.Op)
	size := co.Rec.Size
	f := k.f
	channels := max(pl.Channels, 1)
	sp := co.ringSpec(k)
	switch pl.Algo {
	case AlgoRing:
		switch op {
		case Broadcast, Reduce:
			sp.chunk = co.chunk(1, k)
			chain(c, f, sp)
		default:
			ring(c, f, sp)
		}
	case AlgoTree:
		var ck int64
		ck, c.stepDiv = co.treeChunk(k)
		treeAllReduce(c, f, size, channels, ck, pl.Proto)
	case AlgoNVLS:
		return nvls(c, f, op, size, channels, co.chunk(1, k), k.nvlsEff)
	case AlgoNVLSTree:
		if op != AllReduce {
			// AllGather under SimAI's NVLS-Tree rule: NVLS inside servers is
			// the part that differs from a ring; across servers use the ring.
			ring(c, f, sp)
			return nil
		}
		return nvlsTree(c, f, size, channels, co.nvlsTreeChunk(k, c.step.intra > 0 || c.step.inter > 0), k.nvlsEff)
	case AlgoPAT:
		pat(c, op, size, channels, co.chunk(len(co.Ranks), k))
	case AlgoDirect:
		allToAllDirect(c, size, max(pl.Channels, 1), pl.Chunk, k.maxChunks)
	case AlgoPXN:
		allToAllPXN(c, f, size, max(pl.Channels, 1), pl.Chunk, k.maxChunks)
	case AlgoP2P:
		sendRecv(c, size)
	case AlgoMSCCL:
		if k.msccl == nil {
			return fmt.Errorf("an MSCCL collective needs its schedule (simccl-decompose --msccl)")
		}
		return k.msccl.Emit(c, size)
	default:
		return fmt.Errorf("algorithm %s has no decomposition", pl.Algo)
	}
	return nil
}

// union merges two small id lists without duplicates.
func union(a, b []int64) []int64 {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := append([]int64(nil), a...)
	for _, x := range b {
		dup := false
		for _, y := range a {
			if x == y {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

// sendLat is the collective record's send_lat_ps: SimAI replay's send
// latency on a collective that moves data.
func (d *Decomposer) sendLat(pl Plan) int64 {
	if pl.NoOp {
		return 0
	}
	return d.Planner.Opt.SendLatPs
}

// cutRecord is a plan's cut for the collective record, written at
// collective granularity only: at flow granularity the flows are there.
func (d *Decomposer) cutRecord(pl Plan, op Op) *stream.Cut {
	if !d.Collectives || pl.NoOp {
		return nil
	}
	c := &stream.Cut{ChunkBytes: pl.Chunk, MaxChunks: int64(d.Planner.Opt.MaxChunks)}
	if d.Planner.Opt.LaunchLatency {
		c.BaseLatPs, c.IntraLatPs, c.InterLatPs = usToPs(pl.Lat.Base), usToPs(pl.Lat.Intra), usToPs(pl.Lat.Inter)
	}
	s := d.Planner.Opt.collCosts(pl, op)
	c.StepBytes, c.StepIntraPs, c.StepInterPs, c.StepSerialPs, c.StepProxyPs = s.bytes, s.intra, s.inter, s.serial, s.proxyOp
	c.StepTreeFs = s.treeFs
	if pl.Algo == AlgoPXN || pl.Algo == AlgoDirect {
		c.StepPacePs = s.pace
		if s.maxRecvs > 1 { // 1, every preset's, is the key's absence
			c.MaxRecvs = int64(s.maxRecvs)
		}
	}
	if s.treeShare {
		c.StepTreeShare = 1
	}
	if s.treeWhole {
		c.StepTreeWhole = 1
	}
	c.LaunchFloorPs = d.Planner.Opt.launchFloorPs()
	return c
}
