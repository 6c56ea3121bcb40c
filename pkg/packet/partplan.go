package packet

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The load-balanced cut (planParts). A window ends when its busiest part
// has run its events, and every packet that crosses parts is copied
// between them, so a good cut gives each part the same share of the
// events and keeps each packet's hops in one part where it can. Cutting
// whole servers in blocks, as newPartitioning does, leaves every switch of
// a rail-optimised fabric in one part and most of its GPUs in others: on
// the 1024-GPU DP AllReduce nearly every hop crossed.
//
// Here the events are estimated from the flows: each flow's packets spread
// over its equal-cost paths (route.Spreader, as ECMP spreads many flows) are
// charged to both ends of every link they cross (a packet is sent at one
// and arrives at the other; its ACK retraces it). Nodes joined by a link
// that may carry a packet and is shorter than the network's shortest
// (NVLink, in a server whose GPUs send each other anything) stay in one
// part, so the lookahead stays the network's; nodes joined by a dependency
// (a flow released at one node and starting at another) too. Three cuts
// are made of that, and the one whose busiest part's load (plus what
// crosses into and out of it), summed over the run's phases, is least is
// taken: blocks of whole servers (newPartitioning); tiers (each tier's
// switches spread, the GPUs with the switch they send the most through);
// clusters (the heaviest links kept inside clusters while a cluster stays
// within a share of the load, the clusters dealt to the parts heaviest
// first, each to the lightest part: a leaf with its GPUs is a cluster, the
// spines fill the gaps). A phase is where a flow stands among its
// source's flows: a ring's step, an AllToAll's destination (sent in
// order, a wave through the servers that blocks of them took one part at
// a time: 6.07 ideal speedup at 8 parts on a 1024-GPU AllToAll, 7.77 in
// clusters of up to a quarter share; on the 2048-GPU one 6.34, and 6.78
// with clusters of a sixteenth). Each cut in clusters is then refined
// (refine): clusters move between parts while that lowers the
// phase-summed cost, which took the 2048-GPU AllToAll to 7.41 at 8 parts.
// Not the cut in tiers: refined, its cost fell below the clusters' at 16
// parts while the run's parts grew unequal (1.19 max/mean events, ideal
// speedup 11.55 against the clusters' 12.30): the model does not see
// what moving a single GPU or switch does to the events there.

// maxSpreadFlows bounds the flows whose paths are spread to estimate the
// load (every k-th flow beyond): an estimate, exact counts are not needed.
const maxSpreadFlows = 1 << 17

// loadModel is the estimate planParts cuts by: each node's events (in
// bytes), each link's bytes, and the sets of nodes that must share a part.
type loadModel struct {
	w, traffic []float64
	// The same by phase (phases of them, node or link within): a
	// part with its share of the run's events may have all of one
	// phase's, as blocks of servers had an AllToAll's wave through the
	// destinations in order.
	sliceW, sliceTraffic []float64
	inServer             []bool
	spreadAll            bool
	units                *unionFind
	total                float64
	// nodeless: a dependency joins a node to a flow without one (which
	// runs in the first part): units cannot hold it, so a cut keeping
	// them all may still break it (checkReleases looks).
	nodeless bool
}

// model estimates the run's load (see the top of this file).
func (s *Sim) model() (*loadModel, error) {
	t := s.t
	nodes := len(t.Nodes)
	f := s.flows
	flows := f.DAG.Len()
	// Each node's server, dense: the loop over the flows reads both
	// ends' (the topology's records hold two strings each).
	servers, server := int32(0), make([]int32, nodes)
	for v, n := range t.Nodes {
		servers = max(servers, n.Server+1)
		server[v] = n.Server
	}
	m := &loadModel{w: make([]float64, nodes), traffic: make([]float64, len(t.Links)), inServer: make([]bool, servers),
		sliceW: make([]float64, phases*nodes), sliceTraffic: make([]float64, phases*len(t.Links))}
	step := max(1, flows/maxSpreadFlows)
	// A flow's phase: where it stands among its source's flows.
	perSrc := make([]int32, nodes+1)
	rel, moves := s.pv.relEnds()
	for i := range flows {
		perSrc[rel[2*i]]++ // flowNode: nodes when none
	}
	seen := make([]int32, nodes+1)
	phase := 0
	// add runs for every link a flow's shares are put on (its first
	// and last hops; the spines' once for a phase's flows towards a
	// leaf), so it reads each link's ends from a dense array, not the
	// topology's records.
	ends := make([]int32, 2*len(t.Links))
	for li, l := range t.Links {
		ends[2*li], ends[2*li+1] = l.A, l.B
	}
	w, traffic := m.w, m.traffic
	var phW, phTraffic []float64
	// One Spreader a phase: each splits its flows' shares at the spines
	// once for all flows towards a leaf (a 512-GPU AllToAll's 131 k flows
	// spread one by one were 5 G of the 6.75 G two parts cost over the
	// single loop).
	var spread [phases]*route.Spreader
	for ph := range spread {
		spread[ph] = s.r.NewSpreader()
	}
	slice := func(ph int) {
		phW = m.sliceW[ph*nodes : (ph+1)*nodes]
		phTraffic = m.sliceTraffic[ph*len(t.Links) : (ph+1)*len(t.Links)]
	}
	add := func(dl route.DirLink, b float64) {
		li := int(dl.Link())
		a, d := ends[2*li], ends[2*li+1]
		w[a] += b
		w[d] += b
		traffic[li] += b
		phW[a] += b
		phW[d] += b
		phTraffic[li] += b
	}
	for i := int32(0); int(i) < flows; i++ {
		if moves[i>>6]&(1<<(i&63)) == 0 {
			continue
		}
		a, d := rel[2*i], rel[2*i+1] // flowNode is nodes for a source out of range
		if d < 0 || int(a) >= nodes || int(d) >= nodes {
			continue
		}
		if s.fab.isSwitch[a] || s.fab.isSwitch[d] {
			m.spreadAll = true // a switch's flow: which links it uses is not worked out here
		}
		if sa := server[a]; sa >= 0 && sa == server[d] {
			m.inServer[sa] = true
		}
		// Whole packets: a flow's last packet costs the events of a full
		// one. And its own events at its ends (opening its queue pair, the
		// timeout, the completion), in packet-hop units: about three at
		// the source, one at the destination.
		pay := float64(s.cfg.PayloadSize)
		phase = int(int64(seen[a]) * phases / int64(perSrc[a]))
		seen[a]++
		m.w[a] += 1.5 * pay
		m.w[d] += 0.5 * pay
		m.sliceW[phase*nodes+int(a)] += 1.5 * pay
		m.sliceW[phase*nodes+int(d)] += 0.5 * pay
		if int(i)%step != 0 {
			continue
		}
		slice(phase)
		pkts := float64((f.size(i) + int64(s.cfg.PayloadSize) - 1) / int64(s.cfg.PayloadSize))
		if err := spread[phase].Add(a, d, pkts*pay*float64(step), add); err != nil {
			return nil, err
		}
	}
	for ph, sp := range spread {
		slice(ph)
		if err := sp.Flush(add); err != nil {
			return nil, err
		}
	}
	for _, x := range m.w {
		m.total += x
	}
	// Links that may carry a packet and are shorter than the network's
	// shortest are not cut: the lookahead stays the network's.
	net := int64(maxTime)
	for _, l := range t.Links {
		if !s.intraServer(l.A, l.B) {
			net = min(net, l.LatencyPs)
		}
	}
	m.units = newUnionFind(nodes)
	for _, l := range t.Links {
		if l.LatencyPs < net && s.mayCarry(l.A, l.B, m) {
			m.units.union(l.A, l.B)
		}
	}
	// A flow and what releases it share a part (checkReleases).
	// A flow's dependencies are mostly released at one node (a rank's
	// launch, its previous step), so a pair joined just before is skipped.
	d := f.DAG
	lastP, lastC := int32(-1), int32(-1)
	for c := int32(0); int(c) < flows; c++ {
		vc := rel[2*c]
		for _, p := range d.Deps(c) {
			vp := releaser(rel, p, c)
			if int(vp) >= nodes || int(vc) >= nodes {
				m.nodeless = m.nodeless || vp != vc
				continue
			}
			if vp != lastP || vc != lastC {
				m.units.union(vp, vc)
				lastP, lastC = vp, vc
			}
		}
	}
	return m, nil
}

// keeps reports whether pt keeps every set of nodes that must share a
// part in one.
func (m *loadModel) keeps(pt *partitioning) bool {
	for v := range pt.of {
		if pt.of[v] != pt.of[m.units.find(int32(v))] {
			return false
		}
	}
	return true
}

// phases a run's flows are cut into by where they stand among their
// source's flows (a ring's steps, an AllToAll's destinations in order).
const phases = 16

// cost is the estimated time of the busiest parts under pt, summed over
// the phases: in each, the events of the part with the most, plus as
// many again for each byte crossing into or out of it (a crossing copies
// the packet and makes its pair's shadow).
func (m *loadModel) cost(s *Sim, pt *partitioning) float64 {
	nodes, links := len(s.t.Nodes), len(s.t.Links)
	load := make([]float64, pt.n)
	total := 0.0
	for ph := range phases {
		clear(load)
		for v, x := range m.sliceW[ph*nodes : (ph+1)*nodes] {
			load[pt.of[v]] += x
		}
		for li, x := range m.sliceTraffic[ph*links : (ph+1)*links] {
			l := &s.t.Links[li]
			if a, b := pt.of[l.A], pt.of[l.B]; a != b {
				load[a] += x
				load[b] += x
			}
		}
		total += slices.Max(load)
	}
	return total
}

// planParts cuts the fabric into n parts: tier by tier (tiers), by
// clusters (cluster), or in blocks of servers (newPartitioning), whichever
// the load model says runs fastest. Its cut says whether it keeps every
// dependency in one part (keepsDeps).
func (s *Sim) planParts(n int) (*partitioning, error) {
	if n < 2 || n > maxPartitions {
		return nil, fmt.Errorf("partitions: %d is outside 2 to %d", n, maxPartitions)
	}
	m, err := s.model()
	if err != nil {
		return nil, err
	}
	var best *partitioning
	bestCost := 0.0
	if blocks, err := newPartitioning(s.t, n); err == nil && m.keeps(blocks) {
		best, bestCost = blocks, m.cost(s, blocks)
	}
	if m.total > 0 {
		if pt := s.tiers(m, n); pt != nil {
			if c := m.cost(s, pt); best == nil || c < bestCost {
				best, bestCost = pt, c
			}
		}
		// A looser cap keeps more links inside clusters; a tighter one
		// makes more, smaller clusters to deal, which spread a phase's
		// load better.
		for _, fair := range []float64{1.03, 0.5, 0.25, 0.125, 0.0625} {
			pt := s.cluster(m, n, fair)
			if pt == nil {
				continue
			}
			if c := m.cost(s, pt); best == nil || c < bestCost {
				best, bestCost = pt, c
			}
		}
	}
	if best == nil {
		return newPartitioning(s.t, n) // its error
	}
	// A set without load is not dealt: place spreads its nodes by their
	// neighbours, which may split it.
	best.keepsDeps = !m.nodeless && m.keeps(best)
	return best, nil
}

// tiers cuts by m along the fabric's tiers: each tier's switches dealt
// to the parts heaviest first, each to the part with the least of that
// tier's load (a phase busy at one tier, such as an AllToAll's wave
// through the spines, is then spread too), and the GPUs (or the servers
// that must stay whole) each to the part of the switch it sends the most
// through, unless that part has its share of the GPUs' load already:
// then to the part with the least. nil when a part would get no load.
func (s *Sim) tiers(m *loadModel, n int) *partitioning {
	t := s.t
	nodes := len(t.Nodes)
	uf := m.units
	weight := make([]float64, nodes)
	hasGPU := make([]bool, nodes)
	tier := make([]int8, nodes)
	for v := range nodes {
		r := uf.find(int32(v))
		weight[r] += m.w[v]
		if t.Nodes[v].Kind == stream.NodeGPU {
			hasGPU[r] = true
		}
		tier[r] = max(tier[r], t.Nodes[v].Tier)
	}
	var switches, gpus []int32
	gpuTotal := 0.0
	for v := range nodes {
		if uf.find(int32(v)) != int32(v) || weight[v] == 0 {
			continue
		}
		if hasGPU[v] {
			gpus = append(gpus, int32(v))
			gpuTotal += weight[v]
		} else {
			switches = append(switches, int32(v))
		}
	}
	heavier := func(a, b int32) int { return cmp.Compare(weight[b], weight[a]) }
	slices.SortStableFunc(switches, heavier)
	slices.SortStableFunc(gpus, heavier)
	partOf := make([]int, nodes)
	for i := range partOf {
		partOf[i] = -1
	}
	load := make([]float64, n)
	tierLoad := map[int8][]float64{}
	for _, r := range switches {
		tl := tierLoad[tier[r]]
		if tl == nil {
			tl = make([]float64, n)
			tierLoad[tier[r]] = tl
		}
		best := 0
		for k := 1; k < n; k++ {
			if tl[k] < tl[best] || (tl[k] == tl[best] && load[k] < load[best]) {
				best = k
			}
		}
		partOf[r] = best
		tl[best] += weight[r]
		load[best] += weight[r]
	}
	// The switch each GPU set sends the most through.
	via := make([]float64, nodes)
	pref := make([]int32, nodes)
	for i := range pref {
		pref[i] = -1
	}
	for li, l := range t.Links {
		ra, rb := uf.find(l.A), uf.find(l.B)
		if ra == rb || m.traffic[li] == 0 {
			continue
		}
		for _, e := range [2][2]int32{{ra, rb}, {rb, ra}} {
			if g, o := e[0], e[1]; hasGPU[g] && !hasGPU[o] && m.traffic[li] > via[g] {
				via[g], pref[g] = m.traffic[li], o
			}
		}
	}
	gpuLoad := make([]float64, n)
	fair := gpuTotal / float64(n) * 1.03
	for _, r := range gpus {
		best := -1
		if pref[r] >= 0 {
			if k := partOf[pref[r]]; k >= 0 && gpuLoad[k]+weight[r] <= fair {
				best = k
			}
		}
		if best < 0 {
			best = 0
			for k := 1; k < n; k++ {
				if gpuLoad[k] < gpuLoad[best] {
					best = k
				}
			}
		}
		partOf[r] = best
		gpuLoad[best] += weight[r]
		load[best] += weight[r]
	}
	if slices.Min(load) == 0 {
		return nil
	}
	pt := s.place(m, uf, partOf, n)
	if pt != nil {
		pt.by = "tiers"
	}
	return pt
}

// cluster cuts by m: clusters joined along their heaviest links while
// within fair parts of the total, dealt to the n parts heaviest first,
// each to the lightest part. nil when there are fewer clusters than parts
// or a cut link may carry a packet and has no latency.
func (s *Sim) cluster(m *loadModel, n int, fair float64) *partitioning {
	t := s.t
	nodes := len(t.Nodes)
	uf := &unionFind{up: slices.Clone(m.units.up)}
	weight := make([]float64, nodes)
	for v := range nodes {
		weight[uf.find(int32(v))] += m.w[v]
	}
	limit := m.total / float64(n) * fair
	links := make([]int32, 0, len(t.Links))
	for li, l := range t.Links {
		if m.traffic[li] > 0 && uf.find(l.A) != uf.find(l.B) {
			links = append(links, int32(li))
		}
	}
	slices.SortStableFunc(links, func(a, b int32) int { return cmp.Compare(m.traffic[b], m.traffic[a]) })
	for _, li := range links {
		l := &t.Links[li]
		ra, rb := uf.find(l.A), uf.find(l.B)
		if ra != rb && weight[ra]+weight[rb] <= limit {
			sum := weight[ra] + weight[rb]
			uf.union(ra, rb)
			weight[uf.find(ra)] = sum
		}
	}
	// Deal the clusters, heaviest first (ties: lowest node), each to the
	// lightest part (ties: lowest part).
	var roots []int32
	for v := range nodes {
		if uf.find(int32(v)) == int32(v) && weight[v] > 0 {
			roots = append(roots, int32(v))
		}
	}
	if len(roots) < n {
		return nil
	}
	slices.SortStableFunc(roots, func(a, b int32) int { return cmp.Compare(weight[b], weight[a]) })
	load := make([]float64, n)
	partOf := make([]int, nodes)
	for i := range partOf {
		partOf[i] = -1
	}
	for _, r := range roots {
		best := 0
		for k := 1; k < n; k++ {
			if load[k] < load[best] {
				best = k
			}
		}
		partOf[r] = best
		load[best] += weight[r]
	}
	s.refine(m, uf, partOf, n)
	pt := s.place(m, uf, partOf, n)
	if pt != nil {
		pt.by = "clusters"
	}
	return pt
}

// refine moves sets of uf (by their roots in partOf) between parts while a
// move lowers the cost (loadModel.cost: the busiest part's load, crossings
// included, summed over the phases), the best move of each set in turn,
// heaviest first, for at most 8 passes. Dealing by the run's total load
// balances the run, not each phase: the model's cost of the 2048-GPU
// AllToAll's best cut fell by 14% at 8 parts and 5% at 16. A part is
// never emptied.
func (s *Sim) refine(m *loadModel, uf *unionFind, partOf []int, n int) {
	t := s.t
	nodes, links := len(t.Nodes), len(t.Links)
	// The sets with load, their per-phase loads, and the per-phase
	// traffic between each two of them (the links that cross when they
	// are apart).
	idx := make([]int32, nodes)
	for i := range idx {
		idx[i] = -1
	}
	var roots []int32
	for v := range nodes {
		if r := uf.find(int32(v)); idx[r] < 0 && partOf[r] >= 0 {
			idx[r] = int32(len(roots))
			roots = append(roots, r)
		}
	}
	k := len(roots)
	if k <= n || k > 1<<14 {
		return
	}
	w := make([]float64, k*phases)
	for v := range nodes {
		if c := idx[uf.find(int32(v))]; c >= 0 {
			for ph := range phases {
				w[int(c)*phases+ph] += m.sliceW[ph*nodes+v]
			}
		}
	}
	type edge struct {
		to int32
		tr [phases]float64
	}
	adj := make([]map[int32]int, k) // neighbour -> index in edges[c]
	edges := make([][]edge, k)
	for li := range links {
		l := &t.Links[li]
		a, b := idx[uf.find(l.A)], idx[uf.find(l.B)]
		if a < 0 || b < 0 || a == b || m.traffic[li] == 0 {
			continue
		}
		for _, e := range [2][2]int32{{a, b}, {b, a}} {
			x, y := e[0], e[1]
			if adj[x] == nil {
				adj[x] = map[int32]int{}
			}
			j, ok := adj[x][y]
			if !ok {
				j = len(edges[x])
				adj[x][y] = j
				edges[x] = append(edges[x], edge{to: y})
			}
			for ph := range phases {
				edges[x][j].tr[ph] += m.sliceTraffic[ph*links+li]
			}
		}
	}
	part := make([]int, k)
	count := make([]int, n)
	for c, r := range roots {
		part[c] = partOf[r]
		count[part[c]]++
	}
	// load[ph*n+p]: part p's load in phase ph, as cost counts it.
	load := make([]float64, phases*n)
	for c := range k {
		for ph := range phases {
			load[ph*n+part[c]] += w[c*phases+ph]
		}
		for _, e := range edges[c] {
			if part[e.to] != part[c] {
				for ph := range phases {
					load[ph*n+part[c]] += e.tr[ph]
				}
			}
		}
	}
	total := func() float64 {
		sum := 0.0
		for ph := range phases {
			sum += slices.Max(load[ph*n : (ph+1)*n])
		}
		return sum
	}
	// move shifts set c to part q, keeping load as cost counts it.
	move := func(c, q int) {
		p := part[c]
		for ph := range phases {
			load[ph*n+p] -= w[c*phases+ph]
			load[ph*n+q] += w[c*phases+ph]
		}
		for _, e := range edges[c] {
			r := part[e.to]
			for ph := range phases {
				x := e.tr[ph]
				if r != p { // crossed, now maybe not
					load[ph*n+p] -= x
					load[ph*n+r] -= x
				}
				if r != q {
					load[ph*n+q] += x
					load[ph*n+r] += x
				}
			}
		}
		count[p]--
		count[q]++
		part[c] = q
	}
	order := make([]int, k)
	for c := range order {
		order[c] = c
	}
	weight := func(c int) float64 {
		x := 0.0
		for _, y := range w[c*phases : (c+1)*phases] {
			x += y
		}
		return x
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(weight(b), weight(a)) })
	cur := total()
	for pass := 0; pass < 8; pass++ {
		moved := false
		for _, c := range order {
			p := part[c]
			if count[p] == 1 {
				continue
			}
			best, bestCost := p, cur
			for q := range n {
				if q == p {
					continue
				}
				move(c, q)
				if x := total(); x < bestCost*(1-1e-9) {
					best, bestCost = q, x
				}
				move(c, p)
			}
			if best != p {
				move(c, best)
				cur, moved = bestCost, true
			}
		}
		if !moved {
			break
		}
	}
	for c, r := range roots {
		partOf[r] = part[c]
	}
}

// place makes the partitioning that puts each set of uf where partOf
// says (by its root; a set without load beside a neighbour with some, an
// idle NVSwitch by its GPUs, else in the first part). nil when a cut link
// may carry a packet and has no latency.
func (s *Sim) place(m *loadModel, uf *unionFind, partOf []int, n int) *partitioning {
	t := s.t
	nodes := len(t.Nodes)
	pt := &partitioning{of: make([]uint8, nodes), n: n}
	adj := topo.BuildAdjacency(t)
	for v := range nodes {
		k := partOf[uf.find(int32(v))]
		if k < 0 {
			k = 0
			for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
				if q := partOf[uf.find(topo.Other(t, li, int32(v)))]; q >= 0 {
					k = q
					break
				}
			}
		}
		pt.of[v] = uint8(k)
	}
	pt.lookahead = maxTime
	for _, l := range t.Links {
		if pt.of[l.A] != pt.of[l.B] && s.mayCarry(l.A, l.B, m) {
			pt.lookahead = min(pt.lookahead, l.LatencyPs)
		}
	}
	if pt.lookahead <= 0 {
		return nil
	}
	return pt
}

// intraServer reports whether a link joins two nodes of one server.
func (s *Sim) intraServer(a, b int32) bool {
	sa := s.t.Nodes[a].Server
	return sa >= 0 && sa == s.t.Nodes[b].Server
}

// mayCarry reports whether a packet (or a PFC frame) may cross the link
// a-b: any link between servers and switches may; a link inside a server
// only if its GPUs send each other something (a flow between servers
// never crosses an NVSwitch, route.Router's paths go through the network
// switches towards the destination's attachments).
func (s *Sim) mayCarry(a, b int32, m *loadModel) bool {
	if m.spreadAll || !s.intraServer(a, b) {
		return true
	}
	return m.inServer[s.t.Nodes[a].Server]
}

// unionFind joins nodes into sets.
type unionFind struct{ up []int32 }

func newUnionFind(n int) *unionFind {
	u := &unionFind{up: make([]int32, n)}
	for i := range u.up {
		u.up[i] = int32(i)
	}
	return u
}

func (u *unionFind) find(v int32) int32 {
	for u.up[v] != v {
		u.up[v] = u.up[u.up[v]]
		v = u.up[v]
	}
	return v
}

// union joins the sets of a and b under the lower root (deterministic).
func (u *unionFind) union(a, b int32) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if rb < ra {
		ra, rb = rb, ra
	}
	u.up[rb] = ra
}
