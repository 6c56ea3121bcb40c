package collective

import (
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Fabric is what decomposition needs to know of the cluster: which server
// a rank is on and each server's NVSwitches.
type Fabric struct {
	GPUs          int
	GPUsPerServer int
	NVSwitches    [][]int32 // per server, node ids
	// Job: by GPU id, the GPUs the job runs on (nil: all of them). A PXN
	// proxy is a GPU of the job: NCCL relays through a peer rank.
	Job []bool
	// NetPathPs: the link latencies of a fewest-hop path from a server's
	// first GPU to the next server's (its rail peer), which a flow across
	// servers adds after its last byte has left (the backends' timing
	// model); 0 when unknown.
	NetPathPs int64
}

// inJob reports whether GPU g is one of the job's.
func (f Fabric) inJob(g int32) bool { return f.Job == nil || f.Job[g] }

// FabricOf reads the server structure out of a topology.
func FabricOf(t *stream.Topology) Fabric {
	f := Fabric{GPUs: t.GPUs, GPUsPerServer: t.GPUsPerServer, NVSwitches: make([][]int32, t.GPUs/t.GPUsPerServer)}
	for i := t.GPUs; i < len(t.Nodes); i++ {
		n := &t.Nodes[i]
		if n.Kind == stream.NodeNVSwitch && n.Server >= 0 && int(n.Server) < len(f.NVSwitches) {
			f.NVSwitches[n.Server] = append(f.NVSwitches[n.Server], n.ID)
		}
	}
	f.NetPathPs = netPathPs(t)
	return f
}

// netPathPs is the link latencies (ps) of a fewest-hop path from GPU 0 to
// the next server's first GPU over the network's links (not NVLink or
// PCIe): breadth first, the lowest latency among the fewest hops.
func netPathPs(t *stream.Topology) int64 {
	src, dst := int32(0), int32(t.GPUsPerServer)
	if t.GPUsPerServer <= 0 || int(dst) >= t.GPUs || len(t.Nodes) == 0 {
		return 0
	}
	adj := make([][]int32, len(t.Nodes))
	for i, l := range t.Links {
		if l.Kind == "nvlink" || l.Kind == "pcie" || l.A < 0 || l.B < 0 || int(l.A) >= len(adj) || int(l.B) >= len(adj) {
			continue
		}
		adj[l.A] = append(adj[l.A], int32(i))
		adj[l.B] = append(adj[l.B], int32(i))
	}
	lat := make([]int64, len(t.Nodes))
	hops := make([]int32, len(t.Nodes))
	for i := range hops {
		hops[i] = -1
	}
	hops[src] = 0
	for q := []int32{src}; len(q) > 0; q = q[1:] {
		v := q[0]
		if v == dst {
			return lat[v]
		}
		for _, li := range adj[v] {
			l := t.Links[li]
			w := l.A
			if w == v {
				w = l.B
			}
			// GPUs other than the ends do not forward.
			if int(w) < t.GPUs && w != dst {
				continue
			}
			switch {
			case hops[w] < 0:
				hops[w], lat[w] = hops[v]+1, lat[v]+l.LatencyPs
				q = append(q, w)
			case hops[w] == hops[v]+1:
				lat[w] = min(lat[w], lat[v]+l.LatencyPs)
			}
		}
	}
	return 0
}

func (f Fabric) server(r int32) int { return int(r) / f.GPUsPerServer }

// nodesOf splits a group into its servers, in order of first appearance,
// each with its ranks in rank order (positions in the group).
func (f Fabric) nodesOf(ranks []int32) [][]int {
	// Groups mostly list a server's ranks together, so the last server
	// seen is tried before the index (built only when one is revisited).
	var idx map[int]int
	var out [][]int
	servers := make([]int, 0, 8)
	last := -1
	for p, r := range ranks {
		s := f.server(r)
		i := -1
		switch {
		case last >= 0 && servers[last] == s:
			i = last
		case idx != nil:
			if j, ok := idx[s]; ok {
				i = j
			}
		default:
			i = slices.Index(servers, s)
			if len(servers) > 16 {
				idx = make(map[int]int, len(servers))
				for j, x := range servers {
					idx[x] = j
				}
			}
		}
		if i < 0 {
			i = len(out)
			servers = append(servers, s)
			if idx != nil {
				idx[s] = i
			}
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
		last = i
	}
	return out
}

// ringOrder is channel ch's ring as group positions, for a group split
// into its servers by nodesOf. Inside a server the ring follows GPU order
// (NCCL forces index order on NVSwitch systems); across servers, servers
// chain in order, and channel ch enters each server at local GPU ch mod ppn
// so that channels spread over the NICs (rails).
func ringOrder(nodes [][]int, ch int) []int {
	n := 0
	for _, local := range nodes {
		n += len(local)
	}
	order := make([]int, 0, n)
	if len(nodes) == 1 {
		return append(order, nodes[0]...)
	}
	for _, local := range nodes {
		start := ch % len(local)
		for j := range local {
			order = append(order, local[(start+j)%len(local)])
		}
	}
	return order
}

// ringPeriod is how many channels it takes before ringOrder repeats: 1 in
// one server, the servers' GPU count when all hold the same number, and
// otherwise at most limit (no repeat assumed).
func ringPeriod(nodes [][]int, limit int) int {
	if len(nodes) == 1 {
		return 1
	}
	for _, local := range nodes[1:] {
		if len(local) != len(nodes[0]) {
			return limit
		}
	}
	return min(len(nodes[0]), limit)
}

// splitEven gives part i of total split into n nearly equal parts.
func splitEven(total int64, n, i int) int64 {
	s := total / int64(n)
	if int64(i) < total%int64(n) {
		s++
	}
	return s
}

func wire(payload int64, p Proto) int64 {
	switch p {
	case LL:
		return payload * 2
	case LL128:
		return (payload*16 + 14) / 15
	}
	return payload
}

// ringRows reports whether algorithm a runs op as a ring of n-1 (or
// 2(n-1)) steps over every rank, a row of n flows per step: ring AllReduce,
// AllGather and ReduceScatter, and NVLS-Tree's AllGather and
// ReduceScatter, which cross servers on the ring (decompose).
func ringRows(a Algo, op Op) bool {
	return a == AlgoRing && op != Broadcast && op != Reduce || a == AlgoNVLSTree && op != AllReduce
}

// ringSpec describes one ring-based collective.
type ringSpec struct {
	op       Op
	size     int64
	channels int
	chunk    int64 // payload bytes per rank per pipeline step and channel
	proto    Proto
	pxn      bool
}

// ring decomposes AllReduce (2(n-1) steps), AllGather and ReduceScatter
// (n-1 steps) on rings. Each channel carries 1/C of the data in loops of n
// slices of at most chunk bytes; at step s the rank at ring index i sends
// slice (i-s) mod n to index i+1. A flow waits for the slice it forwards
// (the previous step's flow into its sender) and, from the second loop on,
// for the previous flow on its own connection, so rings pipeline across
// ranks as NCCL's do. The first loop pays every step's latency, the data
// dependency carrying it from hop to hop; its steps do not also wait on
// their connection, or a slow hop's latency would add up along its own
// connection as well (NCCL's FIFO keeps several steps in flight). Under
// the transport's costs a ring's first-loop steps do keep their
// connection's order, their latency moved onto a delay node
// (ringConns.send).
func ring(c *cctx, f Fabric, sp ringSpec) {
	nodes := f.nodesOf(c.ranks)
	for ch := 0; ch < sp.channels; ch++ {
		g := newRingChannel(c, f, nodes, sp, ch)
		if c.count {
			c.skip(g.flows())
			continue
		}
		for g.row() {
		}
	}
}

// ringChannel is one channel of a ring collective, emitted a row at a
// time: row (k, s) is the n flows of step s of loop k (with their PXN
// relays). Every dep of a row's flows is in the row before it or in the
// same row, the first row's on the ranks' entry, so a backend expanding a
// COLL node can make row r+1 once row r starts, and hold a few rows per
// channel instead of the collective (expand.go).
type ringChannel struct {
	c                  *cctx
	sp                 ringSpec
	ch                 int
	n, steps, loops    int
	data, loopBytes, b int64
	order              []int
	conn               *ringConns
	k, s               int
	prev, cur          []int64
}

// newRingChannel is channel ch of ring sp on c's ranks, grouped by
// server in nodes (f.nodesOf).
func newRingChannel(c *cctx, f Fabric, nodes [][]int, sp ringSpec, ch int) *ringChannel {
	g := &ringChannel{c: c, sp: sp, ch: ch, n: len(c.ranks)}
	if g.n < 2 || sp.size == 0 {
		return g
	}
	if g.data = splitEven(sp.size, sp.channels, ch); g.data == 0 {
		return g
	}
	g.steps = g.n - 1
	if sp.op == AllReduce {
		g.steps = 2 * (g.n - 1)
	}
	g.order = ringOrder(nodes, ch)
	g.conn = newRingConns(c, f, g.order, sp.pxn)
	g.conn.queued = c.queued()
	g.loopBytes = int64(g.n) * sp.chunk
	g.loops = int((g.data + g.loopBytes - 1) / g.loopBytes)
	g.prev, g.cur = make([]int64, g.n), make([]int64, g.n)
	return g
}

// flows is how many flows the channel emits in all: a row is n flows
// and a PXN_INIT per relayed hop.
func (g *ringChannel) flows() int64 {
	if g.conn == nil {
		return 0
	}
	per := int64(g.n)
	for _, p := range g.conn.proxy {
		if p >= 0 {
			per++
		}
	}
	total := per * int64(g.loops) * int64(g.steps)
	if g.conn.queued && g.loops > 0 {
		total += int64(g.n) * int64(g.steps-1) // the first loop's latency nodes (ringConns.send)
	}
	return total
}

func (g *ringChannel) emitted() int32 { return int32(g.k*g.steps + g.s) }
func (g *ringChannel) more() bool     { return g.conn != nil && g.k < g.loops }

// row emits the next row and reports whether it did; after the last row
// it records the connections' last flows as the ranks' exits.
func (g *ringChannel) row() bool {
	if g.conn == nil || g.k == g.loops {
		return false
	}
	n, s, k := g.n, g.s, g.k
	if s == 0 {
		g.b = min(g.loopBytes, g.data-int64(k)*g.loopBytes)
	}
	for i := 0; i < n; i++ {
		slice := splitEven(g.b, n, ((i-s)%n+n)%n)
		var dataDep int64 = -1
		if s > 0 {
			dataDep = g.prev[(i-1+n)%n]
		}
		var entry []int64
		if k == 0 && s == 0 {
			entry = g.c.entry[g.order[i]]
		}
		g.cur[i] = g.conn.send(i, wire(slice, g.sp.proto), dataDep, entry, k, int32(g.ch), int32(g.loops), k > 0 || s == 0)
	}
	g.prev, g.cur = g.cur, g.prev
	if g.s++; g.s == g.steps {
		g.s, g.k = 0, k+1
		if g.k == g.loops {
			g.conn.exits()
		}
	}
	return true
}

// ringConns tracks the connections of one channel's ring: ring index i
// sends to i+1, through a PXN proxy when the ring crosses servers between
// GPUs of different local index (different rails) and PXN is on.
type ringConns struct {
	c       *cctx
	order   []int
	proxy   []int32 // -1 when i sends directly
	last    []int64 // last flow on i's (final) connection
	lastPXN []int64 // last PXN_INIT flow of i
	// queued: a first loop's later steps keep their connection's order
	// (send); every ring's under the transport's costs
	queued bool
}

func newRingConns(c *cctx, f Fabric, order []int, pxn bool) *ringConns {
	n := len(order)
	rc := &ringConns{c: c, order: order, proxy: make([]int32, n), last: make([]int64, n), lastPXN: make([]int64, n)}
	for i := range order {
		rc.proxy[i], rc.last[i], rc.lastPXN[i] = -1, -1, -1
		src, dst := c.ranks[order[i]], c.ranks[order[(i+1)%n]]
		if pxn && f.server(src) != f.server(dst) {
			// The GPU of the sender's server on the receiver's rail.
			px := int32(f.server(src)*f.GPUsPerServer) + dst%int32(f.GPUsPerServer)
			if px != src && f.inJob(px) {
				rc.proxy[i] = px
			}
		}
	}
	return rc
}

func (rc *ringConns) dst(i int) int32 { return rc.c.ranks[rc.order[(i+1)%len(rc.order)]] }
func (rc *ringConns) src(i int) int32 { return rc.c.ranks[rc.order[i]] }

// send emits ring index i's flow of chunk k and returns the id the next
// step depends on; ordered: the flow also waits for the previous flow on
// its connection.
//
// Unordered (a first loop's later step) on a queued ring (under the
// transport's costs, cctx.queued), the step still goes out after the previous one on its
// connection, as a queue pair sends its writes, but its step latency runs
// from its data, not from that flow: a delay node on the sender waits the
// latency after the data, and the flow waits for it and for its
// connection's previous flow (released when that one's last byte has
// left), keeping only its slices' fixed work (Transport.SliceUs) in
// series. Without it, behind PXN relays several first-loop steps reached
// a NIC at once and shared it as equals, and the packet backend, whose
// flows on a port interleave, ended 6-12% after fluid at 128-512 MiB.
func (rc *ringConns) send(i int, size int64, dataDep int64, entry []int64, k int, ch, chunks int32, ordered bool) int64 {
	c := rc.c
	deps := c.deps(entry)
	if dataDep >= 0 {
		deps = append(deps, dataDep)
	}
	src, dst := rc.src(i), rc.dst(i)
	kind := stream.ConnRing
	prevPXN, prev := rc.lastPXN[i], rc.last[i]
	inOrder := !ordered && prev >= 0 && rc.queued
	if !ordered && !inOrder {
		prevPXN, prev = -1, -1
	}
	if rc.proxy[i] >= 0 {
		rc.lastPXN[i] = c.connFlow(&prevPXN, deps, src, rc.proxy[i], size, 0, ch, int32(k), chunks, stream.ConnPXNInit)
		deps = append(c.deps(nil), rc.lastPXN[i])
		src, kind = rc.proxy[i], stream.ConnNet
	}
	lat := c.ringHop(k, src, dst, size)
	if inOrder {
		serial := c.step.serial * c.step.slices(size)
		d := c.e.Delay(c.id, src, lat-serial, deps)
		deps, lat = append(c.deps(nil), d), serial
	}
	rc.last[i] = c.connFlow(&prev, deps, src, dst, size, lat, ch, int32(k), chunks, kind)
	return rc.last[i]
}

// exits records, for every rank, its last send and last receive.
func (rc *ringConns) exits() {
	n := len(rc.order)
	for i := 0; i < n; i++ {
		if rc.last[i] < 0 {
			continue
		}
		p := rc.order[i]
		rc.c.exit[p] = append(rc.c.exit[p], rc.last[i])
		q := rc.order[(i+1)%n]
		rc.c.exit[q] = append(rc.c.exit[q], rc.last[i])
	}
}

// chain decomposes Broadcast (root first, data flows down the chain) and
// Reduce (root last, partial sums flow towards it) as NCCL's ring does:
// n-1 hops, pipelined in chunks. The root is the group's first rank, which
// channel 0's ring starts with.
func chain(c *cctx, f Fabric, sp ringSpec) {
	n := len(c.ranks)
	if n < 2 || sp.size == 0 {
		return
	}
	order := ringOrder(f.nodesOf(c.ranks), 0) // root, root+1, ...
	if sp.op == Reduce {
		order = append(order[1:], order[0]) // root+1, ..., root
	}
	for ch := 0; ch < sp.channels; ch++ {
		data := splitEven(sp.size, sp.channels, ch)
		if data == 0 {
			continue
		}
		conn := newRingConns(c, f, order, sp.pxn)
		chunks := int((data + sp.chunk - 1) / sp.chunk)
		for k := 0; k < chunks; k++ {
			b := min(sp.chunk, data-int64(k)*sp.chunk)
			var prev int64 = -1
			for i := 0; i < n-1; i++ {
				var entry []int64
				if k == 0 {
					entry = c.entry[order[i]]
				}
				prev = conn.send(i, wire(b, sp.proto), prev, entry, k, int32(ch), int32(chunks), true)
			}
		}
		conn.exits()
	}
}
