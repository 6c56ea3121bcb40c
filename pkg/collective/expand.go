package collective

import (
	"fmt"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Expander turns a collective-granularity COLL node back into the flows
// simccl-decompose writes at flow granularity, for a backend that expands
// collectives when they are released (flowsim-analytical --expand): its
// memory then follows the collectives in flight, not the workload.
//
// Ring and NVLS collectives are expanded a row at a time per channel
// (ringChannel, nvlsChannel): an NVLS AllReduce on the 128 TP groups of
// 1024 GPUs is 4.2 M flows, of which a backend holds two rows per channel.
type Expander struct {
	f       Fabric
	nvlsEff float64
}

// NewExpander expands collectives on topology t.
func NewExpander(t *stream.Topology) *Expander {
	return &Expander{f: FabricOf(t), nvlsEff: nccl.NVLSEfficiency(topo.GPUSpecs[t.GPUType].CC)}
}

// Job tells the expander the GPUs the stream's job runs on: those its
// groups list (a job placed on part of the fabric, simccl-decompose
// --place), so that a PXN proxy is one of them as at flow granularity.
func (x *Expander) Job(groups []*stream.Group) {
	m := make([]bool, x.f.GPUs)
	n := 0
	for _, g := range groups {
		for _, r := range g.Ranks {
			if r >= 0 && int(r) < len(m) && !m[r] {
				m[r] = true
				n++
			}
		}
	}
	if n < len(m) {
		x.f.Job = m
	}
}

// maxExpandChannels bounds a collective record's channels: NCCL's
// MAXCHANNELS is 64; beyond a few hundred a record is corrupt, not a plan.
const maxExpandChannels = 1024

// Origin is where an expanded flow comes from: its group's position in
// the expansion, the ring or NVLS channel that emits it a row at a time
// (Gen) and its row there; Gen is -1 for a flow emitted all at once (entry
// latencies, joins, other algorithms).
type Origin struct {
	Group, Gen, Row int32
	// Base is the id of the group's first flow: a flow's id less Base
	// is its index in its group's expansion, which is the same in every
	// group of like layout (expand's lockstep pairs flows so).
	Base int64
}

// Expansion is one COLL node being expanded: Start emits what begins it,
// Row each further row of a ring or NVLS channel.
type Expansion struct {
	k      cut
	co     Coll
	fn     func(Origin, *stream.Flow) error
	groups []expGroup
	gens   []*expGen // pointers: each holds its emitter's sink
}

type expGroup struct {
	c        *cctx
	firstGen int     // its first channel in gens
	left     int     // channels not finished
	joins    Emitter // numbers the joins that end the ranks' parts
}

// rowGen is a channel emitted a row at a time (ringChannel,
// nvlsChannel): every dep of a row's flows is in the row before it or in
// the same row, the first row's on the ranks' entry.
type rowGen interface {
	row() bool      // emits the next row; false when there is none
	emitted() int32 // rows emitted so far
	more() bool     // rows left to emit
	flows() int64   // flows in all
}

type expGen struct {
	rows  rowGen
	group int32
	e     Emitter
	sink  expSink
}

// expSink hands a flow on with its origin.
type expSink struct {
	x *Expansion
	o Origin
}

func (s *expSink) Flow(f *stream.Flow) error { return s.x.fn(s.o, f) }

// Start begins expanding collective rec on each of groups (the COLL
// node's group, then its siblings): fn gets every flow it emits now. Ids
// and fields are those flow granularity gives the collective's flows, ids
// counting from 0 over the groups in order; deps name ids of the same
// expansion. Ring and NVLS channels then emit their further rows through
// Row; all other flows come now. The flow passed to fn is reused.
func (x *Expander) Start(rec *stream.Collective, groups [][]int32, fn func(Origin, *stream.Flow) error) (*Expansion, error) {
	if rec.Cut == nil {
		return nil, fmt.Errorf("collective %d has no cut record to expand it with (simccl-decompose --granularity collective writes one; streams from before the field lack it)", rec.ID)
	}
	op, err := nccl.ParseOp(rec.Op)
	if err != nil {
		return nil, err
	}
	algo, err := nccl.ParseAlgo(rec.Algorithm)
	if err != nil {
		return nil, err
	}
	if algo == AlgoMSCCL {
		return nil, fmt.Errorf("collective %d runs an MSCCL schedule, which the stream does not carry: decompose it with --granularity flow", rec.ID)
	}
	proto, err := nccl.ParseProto(rec.Protocol)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Size < 0 || rec.Size > MaxCollectiveBytes:
		return nil, fmt.Errorf("collective %d: size %d outside 0 to %d bytes", rec.ID, rec.Size, int64(MaxCollectiveBytes))
	case rec.Cut.LaunchFloorPs > 0:
		return nil, fmt.Errorf("collective %d: cut.launch_floor_ps %d (--transport gpus-per-process above 1) is not expanded: decompose it with --granularity flow", rec.ID, rec.Cut.LaunchFloorPs)
	case rec.Channels > maxExpandChannels:
		return nil, fmt.Errorf("collective %d: %d channels, more than the %d a collective is cut into", rec.ID, rec.Channels, maxExpandChannels)
	}
	p := &Expansion{k: cut{f: x.f, maxChunks: int(rec.Cut.MaxChunks), nvlsEff: x.nvlsEff}, fn: fn,
		co: Coll{Rec: *rec, Plan: Plan{Algo: algo, Proto: proto, Channels: rec.Channels, Chunk: rec.Cut.ChunkBytes, PXN: rec.PXN}}}
	p.co.Rec.Op = string(op)
	if chunked := algo != AlgoDirect && algo != AlgoPXN && algo != AlgoP2P; chunked && rec.Size > 0 && p.co.chunk(1, p.k) < 1 {
		return nil, fmt.Errorf("collective %d: cut.chunk_bytes 0 and cut.max_chunks 0 leave a %s collective no chunk size", rec.ID, algo)
	}
	rows := ringRows(algo, op) || algo == AlgoNVLS
	var next int64 // first id of the next group
	for gi, ranks := range groups {
		start := &Emitter{next: next, sink: &expSink{x: p, o: Origin{Group: int32(gi), Gen: -1, Base: next}}, sendLat: rec.SendLatPs}
		entry := make([][]int64, len(ranks))
		if base := rec.Cut.BaseLatPs; base > 0 {
			for q, r := range ranks {
				entry[q] = []int64{start.Delay(rec.ID, r, base, nil)}
			}
		}
		c := newCtx(start, x.f, rec.ID, ranks, entry)
		c.intra, c.inter = rec.Cut.IntraLatPs, rec.Cut.InterLatPs
		c.step = stepCosts{bytes: rec.Cut.StepBytes, intra: rec.Cut.StepIntraPs, inter: rec.Cut.StepInterPs,
			serial: rec.Cut.StepSerialPs, slice: sliceRuleOf(algo, proto, rec.Cut.StepBytes), proxyOp: rec.Cut.StepProxyPs,
			pace: rec.Cut.StepPacePs, maxRecvs: int(rec.Cut.MaxRecvs),
			roundPaced: algo == AlgoRing && proto != Simple, treeFs: rec.Cut.StepTreeFs, treeShare: rec.Cut.StepTreeShare == 1,
			treeWhole: rec.Cut.StepTreeWhole == 1}
		p.co.Ranks = ranks
		if !rows {
			if err := decompose(c, &p.co, p.k); err != nil {
				return nil, fmt.Errorf("collective %d (%s): %v", rec.ID, rec.Label, err)
			}
			c.finish()
			if err := start.Err(); err != nil {
				return nil, err
			}
			next = start.next
			continue
		}
		g := expGroup{c: c, firstGen: len(p.gens)}
		base, id := next, start.next
		first := len(p.gens)
		channels := max(p.co.Plan.Channels, 1)
		sp, nvlsChunk, nodes := p.co.ringSpec(p.k), p.co.chunk(1, p.k), x.f.nodesOf(ranks)
		for ch := 0; ch < channels; ch++ {
			var r rowGen
			if ringRows(algo, op) {
				r = newRingChannel(c, x.f, nodes, sp, ch)
			} else if r, err = newNVLSChannel(c, x.f, op, rec.Size, channels, ch, nvlsChunk, x.nvlsEff); err != nil {
				return nil, fmt.Errorf("collective %d (%s): %v", rec.ID, rec.Label, err)
			}
			n := r.flows()
			if n == 0 {
				continue
			}
			p.gens = append(p.gens, &expGen{rows: r, group: int32(gi), e: Emitter{next: id}})
			id += n
			g.left++
		}
		// Every rank of an active ring or NVLS channel ends on several
		// flows (its last send and receive), so each gets a join.
		g.joins.next, g.joins.sink = id, start.sink
		next = id
		if g.left > 0 {
			next += int64(len(ranks))
		}
		p.groups = append(p.groups, g)
		for k := first; k < len(p.gens); k++ {
			gen := p.gens[k]
			gen.sink = expSink{x: p, o: Origin{Group: int32(gi), Gen: int32(k), Base: base}}
			gen.e.sink = &gen.sink
			if _, err := p.Row(k); err != nil {
				return nil, err
			}
		}
		if err := start.Err(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Gens is the number of channels the expansion emits row by row.
func (p *Expansion) Gens() int { return len(p.gens) }

// Row emits channel gen's next row (and, after the group's last
// row, the joins that end its ranks' parts); false once it has no more.
func (p *Expansion) Row(gen int) (bool, error) {
	g := p.gens[gen]
	grp := &p.groups[g.group]
	c := grp.c
	c.e = &g.e
	g.sink.o.Row = g.rows.emitted()
	if !g.rows.row() {
		return false, nil
	}
	if err := g.e.Err(); err != nil {
		return false, err
	}
	if g.rows.more() {
		return true, nil
	}
	if grp.left--; grp.left == 0 {
		c.e = &grp.joins
		want := grp.joins.next + int64(len(c.ranks))
		c.finish()
		if err := grp.joins.Err(); err != nil {
			return false, err
		}
		if grp.joins.next != want {
			return false, fmt.Errorf("collective %d: %d joins ended a ring group of %d ranks", p.co.Rec.ID, grp.joins.next-want+int64(len(c.ranks)), len(c.ranks))
		}
	}
	return true, nil
}

// GroupGens is the range of channels group g emits row by row: gens
// first to first+n-1.
func (p *Expansion) GroupGens(g int) (first, n int) {
	if g < 0 || g >= len(p.groups) {
		return 0, 0
	}
	first = p.groups[g].firstGen
	for n = 0; first+n < len(p.gens) && p.gens[first+n].group == int32(g); n++ {
	}
	return first, n
}

// GenGroup is the group (its position in Start's groups) channel gen
// belongs to.
func (p *Expansion) GenGroup(gen int) int { return int(p.gens[gen].group) }

// Rows is how many rows channel gen has emitted.
func (p *Expansion) Rows(gen int) int32 { return p.gens[gen].rows.emitted() }
