package collective

import (
	"github.com/fabricsim/fabricsim/formats/stream"
)

// Sink receives the flows of the DAG in emission order (a stream.Writer
// is one).
type Sink interface {
	Flow(*stream.Flow) error
}

// Emitter numbers flows densely from 0 and writes them to a sink. Every
// flow's deps name flows emitted before it, so the stream is in
// topological order.
type Emitter struct {
	sink Sink
	next int64
	f    stream.Flow
	err  error

	// Transfers (delay nodes excluded) and their bytes so far; Emit
	// attributes the differences to each collective.
	Flows     int64
	WireBytes int64
	// sendLat replaces every transfer's step latency (SimAI replay,
	// Options.SendLatPs): SimAI delays each flow's send by it alone.
	sendLat int64
	// pace is the next transfer's pace_ps (cctx.firstHop), 0 after it
	pace int64
}

// nowhere is a sink that drops every flow (an Emitter that only numbers).
type nowhere struct{}

func (nowhere) Flow(*stream.Flow) error { return nil }

// NewEmitter writes to sink.
func NewEmitter(sink Sink) *Emitter { return &Emitter{sink: sink} }

// Err is the first sink error.
func (e *Emitter) Err() error { return e.err }

// Next is the id the next flow will get.
func (e *Emitter) Next() int64 { return e.next }

// Flow emits a transfer with its step latency (ps) and returns its id.
func (e *Emitter) Flow(coll int64, src, dst int32, size, lat int64, deps []int64, ch, chunk, chunkCount int32, conn string) int64 {
	id := e.next
	e.next++
	pace := e.pace
	e.pace = 0
	if e.sendLat > 0 {
		lat, pace = e.sendLat, 0
	}
	f := &e.f
	*f = stream.Flow{ID: id, Collective: coll, Src: src, Dst: dst, Size: size, Deps: deps,
		Channel: ch, Chunk: chunk, ChunkCount: chunkCount, ConnType: conn, DelayPs: lat, PacePs: pace}
	if e.err == nil {
		e.err = e.sink.Flow(f)
	}
	e.Flows++
	e.WireBytes += size
	return id
}

// Delay emits a pure delay node on a rank (compute time, launch latency, or
// with ps == 0 a join of several dependencies).
func (e *Emitter) Delay(coll int64, rank int32, ps int64, deps []int64) int64 {
	id := e.next
	e.next++
	f := &e.f
	*f = stream.Flow{ID: id, Collective: coll, Src: rank, Dst: rank, Deps: deps, Channel: -1, ChunkCount: 1,
		ConnType: stream.ConnDelay, DelayPs: ps}
	if e.err == nil {
		e.err = e.sink.Flow(f)
	}
	return id
}

// Coll emits a whole collective at collective granularity: one COLL node
// on the rank that stands for its stage, taking ps (NCCL's model time).
func (e *Emitter) Coll(coll int64, rank int32, size, ps int64, deps []int64) int64 {
	id := e.next
	e.next++
	f := &e.f
	*f = stream.Flow{ID: id, Collective: coll, Src: rank, Dst: rank, Size: size, Deps: deps, Channel: -1, ChunkCount: 1,
		ConnType: stream.ConnColl, DelayPs: ps}
	if e.err == nil {
		e.err = e.sink.Flow(f)
	}
	e.WireBytes += size
	return id
}

// cctx is one collective being decomposed: its ranks, what each rank waits
// for before starting (entry) and the flows that end its part (exit).
type cctx struct {
	e     *Emitter
	f     Fabric
	id    int64
	ranks []int32
	entry [][]int64 // by position in the group
	exit  [][]int64
	buf   []int64 // scratch for deps
	// step latencies (ps) of a hop inside a server and between servers
	intra, inter int64
	// the NCCL transport's per-step costs (transport.go), and how many
	// DAG pieces one NCCL step is cut into (tree LL/LL128), which share
	// that step's cost
	step    stepCosts
	stepDiv int64
	// pace is the last firstHop's pace (ps) for the flow connFlow makes
	pace int64
	// count: ring and NVLS channels are counted (skip), not made, for a
	// decomposer numbering flow granularity's flows at collective
	// granularity (Decomposer.flowIDs).
	count bool
}

func newCtx(e *Emitter, f Fabric, id int64, ranks []int32, entry [][]int64) *cctx {
	return &cctx{e: e, f: f, id: id, ranks: ranks, entry: entry, exit: make([][]int64, len(ranks))}
}

// firstHop is the delay of chunk k's transfer of wire bytes b between two
// nodes. NCCL keeps up to NCCL_STEPS steps in flight on a connection, so
// once a pipeline has filled, the hop's latency hides behind the
// transfers before it: only a connection's first chunk pays it, and the
// DAG's critical path takes the latency once per hop. The transport's
// fixed work per step (proxies, GPU, credits; Transport) is paid where
// the hardware pays it: the connection's first step on the pipeline's
// fill (first chunk: one step's cost with the hop latency), and after
// that as a throughput limit, not in series with every chunk: the chunk's
// pace (stream pace_ps, flowset.Pacer) holds the connection's next chunk
// until steps(b) step intervals after this one started sending, which
// the slots hide when the bytes take longer. Charging every chunk's step
// costs on its delay_ps instead added them to each chunk's bytes on the
// connection (a connection's next chunk starts when the last byte has
// left), and a packet backend, whose last byte leaves the NIC at line
// rate while fluid's leaves at its fair share, hid more of them.
func (c *cctx) firstHop(k int, src, dst int32, b int64) int64 {
	// Tree LL/LL128 pieces share an NCCL step (stepDiv): the first piece
	// pays its share of the first step's cost.
	cost := c.stepCost(src, dst) / max(c.stepDiv, 1)
	c.pace = cost * c.step.steps(b)
	if k > 0 {
		return 0
	}
	return c.hop(src, dst) + cost
}

// ringHop is firstHop for a ring's chunk, whose slices' fixed work
// (Transport.SliceUs) is in series with its bytes on every chunk: on the
// pipeline's fill the chunk's hop latency and step cost hide behind it, or
// it behind them, whichever is longer.
//
// An LL or LL128 ring's network steps are paced by the ring's proxy round
// instead (stepCosts.roundPaced): the step's cost (the GPU's and the send
// proxy's) is the latency of its post, which the connection's slots
// pipeline, while the proxy thread's occupancy per post (ring-op) is the
// round already in series with every slice (Plan.RingRoundPs), so the
// connection's next step waits for this one to have left, no more.
func (c *cctx) ringHop(k int, src, dst int32, b int64) int64 {
	d := max(c.firstHop(k, src, dst, b), c.step.serial*c.step.slices(b))
	if c.step.roundPaced && c.crosses(src, dst) {
		c.pace = 0
	}
	return d
}

// queued reports whether a ring's first-loop steps keep their
// connection's order (ringConns.send): under the transport's costs, not
// in SimAI replay. Default streams stay as they were.
func (c *cctx) queued() bool {
	return (c.step.intra > 0 || c.step.inter > 0) && c.e.sendLat == 0
}

// stepCost is the transport's cost of one step between two nodes (ps).
func (c *cctx) stepCost(src, dst int32) int64 {
	if c.crosses(src, dst) {
		return c.step.inter
	}
	return c.step.intra
}

// crosses reports whether two GPUs are on different servers.
func (c *cctx) crosses(src, dst int32) bool {
	g := int32(c.f.GPUs)
	return src < g && dst < g && c.f.server(src) != c.f.server(dst)
}

// hop is the step latency of a transfer between two nodes: the network's
// when they are GPUs of different servers, NVLink's (or PCIe's) otherwise;
// NVSwitch endpoints are inside a server.
func (c *cctx) hop(src, dst int32) int64 {
	g := int32(c.f.GPUs)
	if src < g && dst < g && c.f.server(src) != c.f.server(dst) {
		return c.inter
	}
	return c.intra
}

// deps assembles a dependency list; the result is only valid until the
// next call (the emitter copies it out when encoding).
func (c *cctx) deps(lists ...[]int64) []int64 {
	c.buf = c.buf[:0]
	for _, l := range lists {
		c.buf = append(c.buf, l...)
	}
	return c.buf
}

// connFlow emits a flow with step latency lat (ps) that waits for deps
// (built with c.deps) and for *last, the previous flow on its connection
// (-1: none), so that a connection carries its flows in order; the flow
// becomes *last.
func (c *cctx) connFlow(last *int64, deps []int64, src, dst int32, size, lat int64, ch, chunk, chunks int32, conn string) int64 {
	if *last >= 0 {
		deps = append(deps, *last)
	}
	c.e.pace, c.pace = c.pace, 0
	*last = c.e.Flow(c.id, src, dst, size, lat, deps, ch, chunk, chunks, conn)
	c.buf = deps
	return *last
}

// skip lets the n flows of a ring or NVLS channel (cctx.count) go by
// unmade: their ids are taken, and, as after an active channel, where
// every rank ends on its last send and receive, each rank's part ends on
// a join (finish). The exits are placeholders, never a flow's id.
func (c *cctx) skip(n int64) {
	if n == 0 {
		return
	}
	c.e.next += n
	for p := range c.exit {
		if len(c.exit[p]) < 2 {
			c.exit[p] = append(c.exit[p], -1, -1)
		}
	}
}

// finish joins each rank's exit flows into one node and returns, per
// position, what the rank's next operation must wait for.
func (c *cctx) finish() [][]int64 {
	out := make([][]int64, len(c.ranks))
	for i, ex := range c.exit {
		switch len(ex) {
		case 0:
			out[i] = c.entry[i]
		case 1:
			out[i] = []int64{ex[0]}
		default:
			out[i] = []int64{c.e.Delay(c.id, c.ranks[i], 0, ex)}
		}
	}
	return out
}
