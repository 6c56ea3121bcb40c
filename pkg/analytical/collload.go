package analytical

import (
	"fmt"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/linkload"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// maxPricedPairs bounds the rank pairs one collective's traffic matrix may
// have before the fabric is left unpriced (a warning says so): a direct
// AllToAll over 4096 ranks is 16.8 M pairs.
const maxPricedPairs = 1 << 22

// collLoad prices the fabric for COLL nodes (collective granularity).
// NCCL's model time, a COLL's delay_ps, assumes the network beyond the
// NICs never limits a collective. collLoad loads the links with the
// collective's traffic matrix on its group and every sibling group
// (collective.Traffic) and adds the time by which the most loaded fabric
// link is slower than the most loaded NIC link: zero on a non-blocking
// fat-tree under an even split, the uplinks' extra time on an
// oversubscribed one. How the traffic takes the equal-cost paths follows
// the routing policy, as the flows would:
//
//   - spray, adaptive: split evenly over them (route.Spread), the load
//     many sprayed packets or a balancing switch put on each link.
//   - ecmp, flowlet: each connection (a rank pair on one channel) is one
//     flow pinned to a hashed path, and at flow granularity every chunk is
//     hashed anew. So the price is the mean, over draws of those hashes,
//     of each draw's bottleneck: the collisions a chunk row meets on
//     average. Draws go on until the mean is known to 2% (at least
//     minDraws, at most maxDraws). A link's load, for sharing under fluid,
//     is its mean over the draws.
//
// The loads scale with the size, so they are computed once per group and
// plan, per byte.
type collLoad struct {
	in         *flowset.Set
	r          *route.Router
	policy     route.Policy
	seed       uint64
	fab        collective.Fabric
	cache      map[loadKey]*demand
	load       []float64 // scratch, per directed link
	pairs      []pair    // scratch: one stage's traffic, pair by pair
	path       []route.DirLink
	classes    classSums // hashed's scratch: a draw's classes
	draw       pieceDraw // hashed's scratch: a draw's crossing connections
	merge      map[pieceKey]int32
	kinds      []uint8   // per directed link: its kind (kindFabric ...)
	acc        []float64 // levelTimes' scratch, per directed link
	accTouched []route.DirLink
	pos        []int32 // per directed link: its index in the demand's links + 1
	warn       map[string]bool
	res        *Result
}

type loadKey struct {
	group    int64
	op, algo string
	proto    string
	channels int
	pxn      bool
	size     int64 // an AllToAll's (keyOf); 0 for the others
}

// keyOf is COLL record co's key in the price cache. An AllToAll's price
// depends on its size as well: whether its connections move several
// pieces (collective.NetPieces) and its stagger's pace do, so two sizes
// on one group are priced apart, whichever runs first.
func keyOf(co *stream.Collective) loadKey {
	k := loadKey{group: co.Group, op: co.Op, algo: co.Algorithm, proto: co.Protocol, channels: co.Channels, pxn: co.PXN}
	if co.Op == "alltoall" {
		k.size = co.Size
	}
	return k
}

type pair struct {
	a, b  int32
	x     float64
	conns int // connections (flows) the bytes go over
	port  int // the first one's NIC port index; the others follow it
}

// The draws of ECMP hashes per collective (ecmp, flowlet).
const minDraws, maxDraws = 4, 16

// demand is one collective's load on the links per byte of its size.
type demand struct {
	links []route.DirLink
	ps    []float64 // ps each link needs per byte of the collective's size
	extra float64   // ps per byte the fabric adds to NCCL's model time
	nic   float64   // ps per byte of the most loaded NIC link, the even split's
	even  float64   // extra under an even split beyond each connection's port
	// drift: a ring's chunks hashed anew (ecmp, flowlet), whose extra is
	// priced out of phase (outOfPhasePs) over its NICs' time alone (nic).
	drift bool
	// netShare: the share of a multi-server LL or LL128 ring's steps that
	// a datum takes across servers (ringNetShare; 0: not such a ring).
	netShare float64
	// A pipelined AllToAll's draws under ecmp (hashed), for its paced
	// pieces (pacedExtra), the pieces a connection is cut into
	// (collective.NetPieces), and pacedExtra's results by pace.
	draws  []pieceDraw
	pieces int
	paced  map[float64]float64
	// A paced AllToAll's connections by posting level (nil: none).
	stag *stagger
}

// pieceDraw is one ECMP draw of a pipelined collective's connections
// (hashed): those that leave their server, and its busiest NIC port's time
// beyond the NICs' (ps per byte of the collective's size).
type pieceDraw struct {
	conns []pieceConn
	ports float64
}

// pieceConn is a connection of a draw: its most loaded link's time beyond
// the NICs' (ps per byte), its bytes per byte and its path's length.
type pieceConn struct {
	b, x float64
	hops int
}

// cost is what the draw adds to NCCL's model time (ps per byte) when each
// piece takes at least pace: connections of one path length are alike on
// a symmetric fabric, so each class's byte-weighted mean of its pieces'
// max(pace, b) is its connections' long-run pace, and the slowest class
// paces the collective, unless a busier NIC port does (a connection keeps
// its port from piece to piece, and is slow there throughout).
func (dr *pieceDraw) cost(pace float64, cl *classSums) float64 {
	clear(cl.cost)
	clear(cl.bytes)
	for _, c := range dr.conns {
		for len(cl.cost) <= c.hops {
			cl.cost, cl.bytes = append(cl.cost, 0), append(cl.bytes, 0)
		}
		cl.cost[c.hops] += max(pace, c.b) * c.x
		cl.bytes[c.hops] += c.x
	}
	m := max(dr.ports, pace)
	for h, b := range cl.bytes {
		if b > 0 {
			m = max(m, cl.cost[h]/b)
		}
	}
	return m
}

// tailCost is cost for a collective that ends with its slowest
// connection, each of pieces pieces hashed anew: a connection's pace is
// the mean of its pieces' max(pace, b), and the slowest of a class's
// exceeds the class's mean by the draw's worst connection's excess (as
// if whole) over sqrt(pieces), the spread of a mean of that many draws
// (shrink; stagger's hashedAll does the same for a link's load). The class mean
// alone left SimAI's MoE layer's EP AllToAll on the 1:1 k=16 fat-tree at
// 0.88-0.90 of the flows with max-recvs=8 (a 96 us round: 2384.5 against
// 2656.1 and 2697.0 us), 0.92-0.96 with 1.
func (dr *pieceDraw) tailCost(pace float64, pieces int, cl *classSums) float64 {
	m := dr.cost(pace, cl)
	if pieces < 1 {
		return m
	}
	for len(cl.worst) < len(cl.cost) {
		cl.worst = append(cl.worst, 0)
	}
	clear(cl.worst)
	for _, c := range dr.conns {
		cl.worst[c.hops] = max(cl.worst[c.hops], max(pace, c.b))
	}
	for h, b := range cl.bytes {
		if b > 0 {
			m = max(m, shrink(cl.cost[h]/b, cl.worst[h], int64(pieces)))
		}
	}
	return m
}

// pieceKey is what pieceDraw.cost reads of a connection beside its bytes.
type pieceKey struct {
	b    float64
	hops int
}

// addPiece appends pc to a draw's connections; a draw kept (keep) merges
// it into one alike (its bytes added: cost reads only b and hops), which
// bounds a kept draw by the fabric's links rather than its connections (a
// direct AllToAll on 1024 ranks has a million, 16 draws of them 400 MB).
func (c *collLoad) addPiece(conns []pieceConn, pc pieceConn, keep bool) []pieceConn {
	if !keep {
		return append(conns, pc)
	}
	if c.merge == nil {
		c.merge = map[pieceKey]int32{}
	}
	k := pieceKey{pc.b, pc.hops}
	if i, ok := c.merge[k]; ok {
		conns[i].x += pc.x
		return conns
	}
	c.merge[k] = int32(len(conns))
	return append(conns, pc)
}

// classSums is pieceDraw.cost's scratch: per path length, cost and
// bytes, and tailCost's worst connection's.
type classSums struct{ cost, bytes, worst []float64 }

// pacedExtra is what a pipelined AllToAll whose pieces are paced at pace
// ps per byte beyond NCCL's model time takes beyond that time (ps per
// byte): each piece is hashed anew and takes the longer of its pace and
// its bytes on its own path, so the draws' mean is of max(pace, b) piece
// by piece, more than max(pace, the mean of b) (the flows' EP AllToAll of
// SimAI's MoE layer on a 1:1 k=16 fat-tree: 0.85 of the flows' exposed
// time with the latter, 0.94 with this), and the slowest connection ends
// it (pieceDraw.tailCost: 1.05). pacedExtra(0) is extra.
func (d *demand) pacedExtra(pace float64, cl *classSums) float64 {
	if x, ok := d.paced[pace]; ok {
		return x
	}
	var sum float64
	for i := range d.draws {
		sum += d.draws[i].tailCost(pace, d.pieces, cl)
	}
	if d.paced == nil {
		d.paced = map[float64]float64{}
	}
	d.paced[pace] = sum / float64(len(d.draws))
	return d.paced[pace]
}

func newCollLoad(in *flowset.Set, r *route.Router, policy route.Policy, seed uint64, res *Result) *collLoad {
	c := &collLoad{in: in, r: r, policy: policy, seed: seed, fab: collective.FabricOf(in.Topology), cache: map[loadKey]*demand{},
		load: make([]float64, r.DirLinks()), acc: make([]float64, r.DirLinks()), kinds: make([]uint8, r.DirLinks()), pos: make([]int32, r.DirLinks()),
		warn: map[string]bool{}, res: res}
	for l := range c.kinds {
		switch in.Topology.Links[route.DirLink(l).Link()].Kind {
		case stream.LinkFabric:
			c.kinds[l] = kindFabric
		case stream.LinkNIC:
			c.kinds[l] = kindNIC
		case stream.LinkPCIe:
			c.kinds[l] = kindPCIe
		}
	}
	return c
}

// Link kinds, per directed link (collLoad.kinds).
const (
	kindOther uint8 = iota // NVLink
	kindFabric
	kindNIC
	kindPCIe
)

// pinned reports whether a link kind's load counts against NCCL's model
// time: the fabric's, and the NIC links' once each connection keeps to its
// port (NVLink and PCIe inside a server are the model's own).
func pinned(kind uint8) bool { return kind == kindFabric || kind == kindNIC }

// alone is COLL node f's time alone on the fabric: its delay (NCCL's
// model time and the transport's costs) plus what the fabric adds.
func (c *collLoad) alone(f *flowset.Flow) des.Time { return c.aloneWith(f, c.demandOf(f)) }

// aloneWith is alone under demand d. An AllToAll's transport costs are
// a pace on each connection (one step per proxy round, a2a.go p2pSteps)
// that runs beside its bytes, not after them: the fabric then adds only
// what its bytes' time (NCCL's model time, predicted_ps, plus the
// fabric's extra) exceeds the paced delay by, as the flows show (64 MiB
// on 128 H100s, h100-ib, 2:1 spines, spray: flows and node 1.00x their
// 1:1 time, 3.107 -> 3.112 ms; 1.33x when the extra was added to the
// paced time). A pipelined
// AllToAll's pieces (PXN's) are hashed anew, so each piece is paced or
// slowed on its own (demand.pacedExtra). Without the transport's costs
// the delay is the model time and this is the sum.
// A tree's pieces go beside their pace as well (fabric_lat_ps, set by the
// decomposer): the fabric's busiest link under an even split bounds it as
// its NIC does, its bytes after the first piece's latencies (A100, 16 MiB
// on 16 ranks, a 4:1 k=16 fat-tree: 362.3 us paced by the GPUs' tree
// steps, 179 us of bytes on the uplinks; the flows took 384.2, the delay
// plus the extra 499.6). What hashing adds beyond the even split
// (collisions) slows the pieces that meet them, in series with their
// pace, as the extra did (A100 1:1 256 MiB: flows 4597 us, 4457 without).
// The other collectives' per-step work is in series with their bytes
// (a ring's slices), so the fabric's extra adds to it: in full, or for a
// ring under ecmp at processor sharing's rate (outOfPhasePs), or for an
// LL or LL128 ring across servers under an even split on its network
// steps (evenRingPs).
func (c *collLoad) aloneWith(f *flowset.Flow, d *demand) des.Time {
	x := d.extraFor(f.Size)
	co := c.in.Collectives[f.Coll]
	if co != nil && co.FabricLatPs > 0 && d != nil {
		// Under hashed routing the class mean (extra) can fall below the
		// even split, which still bounds the bytes (boundFor).
		return max(f.Lat, des.Time(co.FabricLatPs)+d.boundFor(f.Size)) + des.Time(max(0, d.extra-d.even)*float64(f.Size))
	}
	if co != nil && co.Op == "alltoall" && f.Lat > des.Time(co.PredictedPs) {
		model := des.Time(co.PredictedPs)
		t := f.Lat + max(0, min(x, model+x-f.Lat))
		if d != nil && len(d.draws) > 0 && f.Size > 0 {
			// Pieces hashed anew (ecmp's draws): each paced or slowed on
			// its own; never below the delay (the float's truncation).
			t = max(f.Lat, model+des.Time(d.pacedExtra(float64(f.Lat-model)/float64(f.Size), &c.classes)*float64(f.Size)))
		}
		if d != nil && d.stag != nil {
			// Its connections posted in turn: the late ones' bytes on
			// the fabric after their posting.
			t = max(t, f.Lat+des.Time(c.staggerExtra(d.stag, co, f.Size)))
		}
		return t
	}
	t := f.Lat + x
	if d != nil && d.drift && f.Size > 0 {
		t = outOfPhasePs(f.Lat, des.Time(d.nic*float64(f.Size)), x)
	} else if co != nil && co.Cut != nil && co.Cut.RingConnPs > 0 && d != nil && d.netShare > 0 {
		t = evenRingPs(f.Lat, des.Time(co.Cut.RingConnPs), x, d.netShare)
	}
	// A ring its NVLink paces in phase takes that long whatever the
	// fabric adds to its network steps: the slower of the two paces it.
	if co != nil && co.Cut != nil {
		t = max(t, des.Time(co.Cut.NVLinkLockPs))
	}
	// No draw of the hashes loads the busiest link less than the even
	// split, and the stage's bytes must all cross it: the hashed
	// connections' class means put 256 MiB ring AllReduces on groups split
	// 4 + 8 at 0.86 of the flows on a 4:1 tree, under that bound.
	return max(t, d.boundFor(f.Size))
}

// boundFor is the time the bytes of a collective of size bytes take at
// least on the busiest link of an even split (nil: none).
func (d *demand) boundFor(size int64) des.Time {
	if d == nil {
		return 0
	}
	return des.Time((d.nic + d.even) * float64(size))
}

// outOfPhasePs is a ring's time (ps) under ecmp: t0 its time on the
// NICs alone, nic of it its bytes on its busiest NIC link, the rest
// (f = t0 - nic) its fixed work, and x what its connections' busiest
// links take beyond nic for the bytes hashed onto them (collLoad.hashed).
// Symmetric rings stay in phase under an even split, every colliding
// byte waits for the others' and x adds in series (t0 + x, as the flows
// under spray). Chunks hashed anew drift apart, and a chunk's bytes share
// a link only with the chunks on it at that moment: processor sharing at
// the others' load rho = x / T stretches its bytes to nic / (1 - rho),
//
//	T = f + nic T / (T - x),  T^2 - (f + nic + x) T + f x = 0,
//
// the larger root, between t0 (x = 0) and t0 + x (f = 0). H100 rings on
// the k=16 fat-tree aligned to servers (1-256 MiB, 1:1 and 4:1): in
// series was 0.90-1.60 of the flows (fluid, ecmp), this 0.87-1.19; e.g.
// 16 MiB on 8 + 8 H100s 1.116 -> 1.018 (TestRingFabricExtraOutOfPhase).
func outOfPhasePs(t0, nic, x des.Time) des.Time {
	if x <= 0 || nic <= 0 || t0 <= nic {
		return t0 + x
	}
	f, b, o := float64(t0-nic), float64(nic), float64(x)
	u := f + b + o
	return des.Time((u + math.Sqrt(u*u-4*f*o)) / 2)
}

// evenRingPs is an LL or LL128 ring's time (ps) across servers when the
// fabric beyond the NICs takes x more for its bytes under an even split
// (spray, adaptive: an oversubscribed uplink): t0 its delay, the datum's
// path (or its network connection's steps, whichever is longer), conn
// its network connection's own steps in order (the record's ring_conn_ps)
// and share the part of the path's steps that cross servers. The extra
// slows each network step's bytes: all of a connection's steps, which run
// one after another, pay it whole, and the datum's path only on its
// network hops, as the flows show under spray on a 4:1 k=16 fat-tree
// (16 MiB AllGather on 8 + 8 H100s: conn 129.0 us + 125.8 of extra =
// 254.8 against the flows' 254.9, where the delay plus the extra was
// 269.5; 64 MiB AllReduce on 16 x 8: conn 1312.1 + 1065.4 = 2377.5 against
// 2377.5, was 2715.7; one rank a server on 12 servers crosses on every
// step, share 1, and keeps t0 + x: 1497.3 against 1497.3).
func evenRingPs(t0, conn, x des.Time, share float64) des.Time {
	return max(t0+des.Time(float64(x)*share), conn+x)
}

// ringNetShare is the share of a ring's steps on which a datum crosses
// servers (collective.RingCrossings' inter over its steps); 0 on one
// server.
func ringNetShare(op string, ranks []int32, t *stream.Topology) float64 {
	servers := map[int32]bool{}
	for _, r := range ranks {
		servers[t.Nodes[r].Server] = true
	}
	n, nodes := len(ranks), len(servers)
	if n < 2 || nodes < 2 {
		return 0
	}
	steps, inter := collective.RingCrossings(collective.Op(op), n, nodes)
	return float64(inter) / float64(steps)
}

// extraFor is the time the fabric adds to a collective of size bytes; an
// unpriced collective (nil) gets none.
func (d *demand) extraFor(size int64) des.Time {
	if d == nil {
		return 0
	}
	return des.Time(d.extra * float64(size))
}

// demandOf returns COLL node f's per-byte demand, nil when it cannot be
// priced (the run then goes on at NCCL's model time, with a warning).
func (c *collLoad) demandOf(f *flowset.Flow) *demand {
	co := c.in.Collectives[f.Coll]
	if co == nil {
		return nil
	}
	k := keyOf(co)
	if d, ok := c.cache[k]; ok {
		return d
	}
	d, err := c.price(co)
	if err != nil {
		clear(c.load) // price stopped half way through its scratch
		c.warnOnce(fmt.Sprintf("%s %s on group %d: fabric not priced (%v); it takes NCCL's model time", co.Algorithm, co.Op, co.Group, err))
	}
	c.cache[k] = d
	return d
}

// warnOnce adds msg to the run's warnings unless it is there already.
func (c *collLoad) warnOnce(msg string) {
	if !c.warn[msg] {
		c.warn[msg] = true
		c.res.Warnings = append(c.res.Warnings, msg)
	}
}

func (c *collLoad) price(co *stream.Collective) (*demand, error) {
	g := c.in.Groups[co.Group]
	if g == nil {
		return nil, fmt.Errorf("no group %d", co.Group)
	}
	sp, err := collective.SpecOf(co, c.in.Topology.GPUType)
	if err != nil {
		return nil, err
	}
	groups := [][]int32{g.Ranks}
	for _, id := range g.Siblings {
		groups = append(groups, c.in.Groups[id].Ranks)
	}
	if n := int64(len(g.Ranks)); n*n*int64(len(groups)) > maxPricedPairs && (sp.Algo == nccl.AlgoDirect || sp.Algo == nccl.AlgoPXN) {
		return nil, fmt.Errorf("%d groups of %d ranks are more than %d rank pairs", len(groups), n, maxPricedPairs)
	}
	// The pairs are gathered in a slice and merged after a stable sort,
	// cheaper than a map for the thousands a stage makes; the fixed order
	// keeps the float sums, and so the run, deterministic.
	pairs := c.pairs[:0]
	for _, ranks := range groups {
		if err := collective.TrafficConns(c.fab, sp, 1, ranks, func(a, b int32, x float64, conns int) { pairs = append(pairs, pair{a: a, b: b, x: x, conns: conns}) }); err != nil {
			return nil, err
		}
	}
	c.pairs = pairs // the scratch is kept for the next stage
	slices.SortStableFunc(pairs, func(x, y pair) int {
		if x.a != y.a {
			return int(x.a - y.a)
		}
		return int(x.b - y.b)
	})
	merged := pairs[:0]
	for _, p := range pairs {
		if k := len(merged) - 1; k >= 0 && merged[k].a == p.a && merged[k].b == p.b {
			merged[k].x += p.x
			merged[k].conns += p.conns
		} else {
			merged = append(merged, p)
		}
	}
	// A GPU's connections to other servers take its NIC ports in turn, as
	// the expansion numbers them (a bonded NIC pins each queue pair to a
	// port): connections, not bytes, are balanced over the ports.
	next := map[int32]int{}
	t := c.in.Topology
	for i := range merged {
		p := &merged[i]
		if p.a < int32(t.GPUs) && p.b < int32(t.GPUs) && t.Nodes[p.a].Server != t.Nodes[p.b].Server {
			p.port = next[p.a]
			next[p.a] += max(p.conns, 1)
		}
	}
	var touched []route.DirLink
	add := func(d route.DirLink, x float64) {
		if c.load[d] == 0 {
			touched = append(touched, d)
		}
		c.load[d] += x
	}
	for _, p := range merged {
		if err := c.r.Spread(p.a, p.b, p.x, add); err != nil {
			return nil, err
		}
	}
	slices.Sort(touched)
	d := &demand{links: touched, ps: make([]float64, len(touched))}
	// NCCL's model time spreads a GPU's bytes over its NIC ports: the
	// most loaded NIC link of that even split is what the fabric is
	// measured against.
	// NCCL's model knows the NICs' nominal rates: a degraded NIC link
	// (--link-scale) is measured against its nominal time, so its slowness
	// counts.
	var nic float64
	for i, l := range touched {
		d.ps[i] = c.load[l] * 8e12 / c.r.Bandwidth(l)
		if k := c.kinds[l]; k == kindNIC || k == kindPCIe {
			nic = max(nic, c.load[l]*8e12/c.in.Topology.Links[l.Link()].BWbps)
		}
		c.load[l] = 0
	}
	d.nic = nic
	if co.Op == "alltoall" {
		var skipped int
		if d.stag, skipped = c.newStagger(co, sp.Algo, groups, merged); skipped > 0 {
			c.warnOnce(fmt.Sprintf("%s %s on group %d: %d connections across servers relay through a GPU outside their group (a group not aligned to servers): their posting order is not priced, collective granularity may be short; --granularity flow runs them", co.Algorithm, co.Op, co.Group, skipped))
		}
		if d.stag != nil && !c.policy.Hashed() {
			dr, err := c.spreadLevels(d.stag)
			if err != nil {
				return nil, err
			}
			d.stag.draws, d.stag.spread = []levelDraw{dr}, dr.all
		}
	}
	if d.even, err = c.evenExtra(d, merged, nic); err != nil {
		return nil, err
	}
	if sp.Algo == nccl.AlgoRing && co.Cut != nil && co.Cut.RingConnPs > 0 {
		d.netShare = ringNetShare(co.Op, g.Ranks, t)
	}
	if c.policy.Hashed() {
		pipelined := sp.Algo != nccl.AlgoDirect && sp.Algo != nccl.AlgoPXN && sp.Algo != nccl.AlgoP2P
		if (sp.Algo == nccl.AlgoPXN || sp.Algo == nccl.AlgoDirect) && co.Cut != nil {
			// PXN's transfers go in pieces, each hashed anew, when a
			// server's ranks hand them off (collective.PXNPieces), and
			// direct or PXN ones under the transport's costs in NCCL's
			// steps.
			local := 0
			for _, r := range g.Ranks {
				if t.Nodes[r].Server == t.Nodes[g.Ranks[0]].Server {
					local++
				}
			}
			d.pieces = collective.NetPieces(co, len(g.Ranks), local)
			pipelined = d.pieces > 1
		}
		if err := c.hashed(d, merged, nic, pipelined, pipelined && co.Op == "alltoall"); err != nil {
			return nil, err
		}
		// Rings only: trees' pieces (tree.go) were not measured so. Only
		// where hashing loads a link beyond the even split: with one path
		// to choose (one uplink an edge switch) ecmp's flows are spray's,
		// and so is the price (k=16, 8:1 by uplinks, tp16 ReduceScatter of
		// 4 MiB: 121.86 us out of phase, 0.802 of the flows' 151.98).
		d.drift = sp.Algo == nccl.AlgoRing && math.Abs(d.extra-d.even) > 1e-9*d.even
		return d, nil
	}
	d.extra = d.even
	return d, nil
}

// evenExtra loads d's links with pairs split evenly beyond each
// connection's port (d.ps) and returns what the most loaded fabric link or
// NIC port takes beyond the NICs' nic (ps per byte).
func (c *collLoad) evenExtra(d *demand, pairs []pair, nic float64) (float64, error) {
	for _, p := range pairs {
		conns := max(p.conns, 1)
		for k := 0; k < conns; k++ {
			if err := c.r.SpreadPort(p.a, p.b, p.port+k, p.x/float64(conns), func(l route.DirLink, x float64) { c.load[l] += x }); err != nil {
				return 0, err
			}
		}
	}
	var peak float64
	for i, l := range d.links {
		d.ps[i] = c.load[l] * 8e12 / c.r.Bandwidth(l)
		c.load[l] = 0
		if pinned(c.kinds[l]) {
			peak = max(peak, d.ps[i])
		}
	}
	return max(0, peak-nic), nil
}

// addLoads counts in acc the bytes COLL node f puts on each link, as
// priced (under ecmp, the mean over the draws).
func (c *collLoad) addLoads(acc *linkload.Acc, f *flowset.Flow) {
	d := c.demandOf(f)
	if d == nil {
		return
	}
	k := acc.ClassOf(f)
	for i, l := range d.links {
		acc.Add(k, l, d.ps[i]*c.r.Bandwidth(l)/8e12*float64(f.Size))
	}
}

// addSiblings counts in acc the bytes the sibling groups of COLL node f
// (all but its first) send, split as Spread splits them: the groups a
// symmetric expansion stands for without running them, which cross only
// links without a choice. The groups at positions run (0 for f's own, k
// for its kth sibling; expand.Symmetry.Run) ran and are not counted.
func (c *collLoad) addSiblings(acc *linkload.Acc, f *flowset.Flow, run []int32) error {
	co := c.in.Collectives[f.Coll]
	g := c.in.Groups[co.Group]
	sp, err := collective.SpecOf(co, c.in.Topology.GPUType)
	if err != nil {
		return err
	}
	k := acc.ClassOf(f)
	add := func(l route.DirLink, x float64) { acc.Add(k, l, x) }
	var spreadErr error
	for k, id := range g.Siblings {
		if slices.Contains(run, int32(k+1)) {
			continue
		}
		if err := collective.Traffic(c.fab, sp, float64(f.Size), c.in.Groups[id].Ranks, func(a, b int32, x float64) {
			if spreadErr == nil {
				spreadErr = c.r.Spread(a, b, x, add)
			}
		}); err != nil {
			return err
		}
	}
	return spreadErr
}

// addFlowSiblings counts in acc what transfer f stands for at collective
// granularity: the same transfer between the ranks at its ends' places in
// each sibling group of its collective's group (the pipeline transfers of
// every rank of a stage, of which the stream holds the first's), routed as
// the policy routes a flow (hashed as its own id would be, or spread).
func (c *collLoad) addFlowSiblings(acc *linkload.Acc, f *flowset.Flow) error {
	co := c.in.Collectives[f.Coll]
	if co == nil {
		return nil
	}
	g := c.in.Groups[co.Group]
	if g == nil || len(g.Siblings) == 0 {
		return nil
	}
	a, b := slices.Index(g.Ranks, f.Src), slices.Index(g.Ranks, f.Dst)
	if a < 0 || b < 0 {
		return nil
	}
	k := acc.ClassOf(f)
	add := func(l route.DirLink, x float64) { acc.Add(k, l, x) }
	for _, id := range g.Siblings {
		r := c.in.Groups[id].Ranks
		src, dst := r[a], r[b]
		if !c.policy.Hashed() {
			if err := c.r.SpreadPort(src, dst, int(f.Port), float64(f.Size), add); err != nil {
				return err
			}
			continue
		}
		var err error
		if c.path, err = c.r.AppendPathPort(c.path[:0], src, dst, route.QPHash(src, dst, f.ID, 0, c.seed), int(f.Port)); err != nil {
			return err
		}
		for _, l := range c.path {
			add(l, float64(f.Size))
		}
	}
	return nil
}

// hashed prices d under ECMP: draws of the connections' hashed paths,
// until the mean cost is known to 2%. In a draw a connection is paced by
// the most loaded link of its path, and costs the time that link needs
// beyond nic (the even split's NIC bottleneck: bonded NICs put a GPU's
// connections on its ports in turn, so the NICs load as evenly as that).
// A collective of one transfer per connection (AllToAll, SendRecv) ends
// with its slowest connection: a draw costs its worst connection. A
// pipelined one (rings, trees, PXN's pieces) sends each connection's
// chunks and steps one after another, each hashed anew, and a
// connection's time is the sum of theirs: a draw costs the most of its
// classes' means, a class being the connections that leave their server
// over paths of one length, weighted by their bytes, or, if more, its
// busiest NIC port's time beyond nic (a connection keeps its port, and the
// connections there are slow throughout; pieceDraw.cost). keep stores the
// draws in d (a pipelined AllToAll's, whose pieces are paced: pacedExtra).
// The links' loads become their means over the draws.
func (c *collLoad) hashed(d *demand, pairs []pair, nic float64, pipelined, keep bool) error {
	clear(d.ps)
	for i, l := range d.links {
		c.pos[l] = int32(i) + 1
	}
	defer func() {
		for _, l := range d.links {
			c.pos[l] = 0
		}
	}()
	var touched []route.DirLink
	var paths []route.DirLink // every connection's path, back to back
	var ends []int32          // where each connection's path ends in paths
	var sum, sum2 float64
	var onPath func(lc *levelConn, add func(route.DirLink, float64)) error
	if d.stag != nil {
		first := make([]int32, len(pairs)) // each pair's first connection
		conn := int32(0)
		for i, p := range pairs {
			first[i] = conn
			conn += int32(max(p.conns, 1))
		}
		onPath = func(lc *levelConn, add func(route.DirLink, float64)) error {
			c := first[lc.pair] + lc.k
			from := int32(0)
			if c > 0 {
				from = ends[c-1]
			}
			for _, l := range paths[from:ends[c]] {
				add(l, lc.x)
			}
			return nil
		}
	}
	n := 0
	for ; n < maxDraws; n++ {
		touched, paths, ends = touched[:0], paths[:0], ends[:0]
		for _, p := range pairs {
			conns := max(p.conns, 1)
			x := p.x / float64(conns)
			for k := 0; k < conns; k++ {
				h := route.FlowHash(p.a, p.b, int64(n)<<32|int64(k), c.seed)
				start := len(paths)
				var err error
				if paths, err = c.r.AppendPathPort(paths, p.a, p.b, h, p.port+k); err != nil {
					return err
				}
				ends = append(ends, int32(len(paths)))
				for _, l := range paths[start:] {
					if c.load[l] == 0 {
						touched = append(touched, l)
					}
					c.load[l] += x
				}
			}
		}
		if onPath != nil {
			lt, err := c.levelTimes(d.stag, onPath)
			if err != nil {
				return err
			}
			d.stag.draws = append(d.stag.draws, lt)
		}
		// The loads as ps per byte, kept in c.load until the draw is costed.
		for _, l := range touched {
			ps := c.load[l] * 8e12 / c.r.Bandwidth(l)
			i := c.pos[l] - 1
			if i < 0 { // a hashed path off the even split's links cannot be
				return fmt.Errorf("internal: hashed path crosses link %d, which the even split does not", l.Link())
			}
			d.ps[i] += ps
			c.load[l] = ps
		}
		// Pipelined, the draw's crossing connections (an intra-switch hop
		// never waits for the uplinks) are costed by class (pieceDraw.cost).
		var cost, ports float64
		dr := &c.draw
		if keep {
			dr = &pieceDraw{}
		}
		dr.conns = dr.conns[:0]
		clear(c.merge)
		conn, start := 0, int32(0)
		for _, p := range pairs {
			conns := max(p.conns, 1)
			x := p.x / float64(conns)
			for k := 0; k < conns; k++ {
				var load float64 // the busiest link's load on the path
				crosses := false // leaves its server: a NIC or the fabric
				for _, l := range paths[start:ends[conn]] {
					switch c.kinds[l] {
					case kindFabric:
						load, crosses = max(load, c.load[l]), true
					case kindNIC:
						// A connection keeps its NIC port from piece to
						// piece: a busier port slows it throughout.
						load, crosses = max(load, c.load[l]), true
						ports = max(ports, c.load[l])
					}
				}
				hops := int(ends[conn] - start)
				start = ends[conn]
				conn++
				if b := max(0, load-nic); !pipelined {
					cost = max(cost, b)
				} else if crosses { // NVLink hops are NCCL's model's own
					dr.conns = c.addPiece(dr.conns, pieceConn{b: b, x: x, hops: hops}, keep)
				}
			}
		}
		if pipelined {
			dr.ports = ports - nic
			cost = dr.cost(0, &c.classes)
			if keep {
				d.draws = append(d.draws, *dr)
			}
		}
		for _, l := range touched {
			c.load[l] = 0
		}
		sum += cost
		sum2 += cost * cost
		if m := sum / float64(n+1); n+1 >= minDraws {
			// Standard error of the mean under 2% of it (or no cost at all):
			// well inside the model's own error against flows (5-10%).
			v := max(0, sum2/float64(n+1)-m*m)
			if m == 0 || math.Sqrt(v/float64(n+1)) <= 0.02*m {
				n++
				break
			}
		}
	}
	for i := range d.ps {
		d.ps[i] /= float64(n)
	}
	d.extra = sum / float64(n)
	return nil
}
