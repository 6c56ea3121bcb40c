package collective

import (
	"cmp"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/nccl"
)

// gpuLoad is the bytes a decomposition puts on one GPU's links, each way:
// its NVLink (to its peers and NVSwitch) and its share of its server's NICs.
type gpuLoad struct{ nvOut, nvIn, nicOut, nicIn float64 }

// gpuTraffic adds collective c's traffic (Traffic: the flows' bytes summed
// over chunks and steps) onto the loads at returns, by GPU and by ring
// (trafficGroups' group: channels whose rings coincide, which run in
// phase), and returns the rates (bytes per ps) of a GPU's NVLink and of
// its share of the NICs; ok is false where the server model lacks a rate
// (no NVLink, no NIC) or the traffic cannot be formed.
func (d *Decomposer) gpuTraffic(c *Coll, at func(g int32, group int) *gpuLoad) (nv, nic float64, ok bool) {
	m := d.Planner.M
	f := d.Fabric
	if m.NVLinkGBps <= 0 || f.GPUsPerServer <= 0 || c.Rec.Size <= 0 {
		return 0, 0, false
	}
	sp := TrafficSpec{Op: Op(c.Rec.Op), Algo: c.Plan.Algo, Proto: c.Plan.Proto, Channels: max(c.Plan.Channels, 1), PXN: c.Plan.PXN, NVLSEff: nccl.NVLSEfficiency(m.CC)}
	nv = m.NVLinkGBps * 1e-3
	if m.NICs > 0 {
		nic = m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	}
	gpu := func(n int32) bool { return int(n) < f.GPUs }
	inter := false
	err := trafficGroups(f, sp, float64(c.Rec.Size), c.Ranks, func(a, b int32, x float64, _, group int) {
		switch {
		case gpu(a) && gpu(b) && f.server(a) != f.server(b):
			at(a, group).nicOut += x
			at(b, group).nicIn += x
			inter = true
		default: // inside a server: GPU to GPU, or to or from an NVSwitch
			if gpu(a) {
				at(a, group).nvOut += x
			}
			if gpu(b) {
				at(b, group).nvIn += x
			}
		}
	})
	if err != nil || inter && nic <= 0 {
		return 0, 0, false
	}
	return nv, nic, true
}

// linkBwPs is the bandwidth term of collective c as flow granularity's
// transfers make it: the bytes the decomposition puts on each GPU's
// NVLink (to its peers and NVSwitch) and on its NIC links, each way, over
// that link's rate, the most loaded of them. Flow granularity's transfers
// move at link rates, so this, not NCCL's tuning-model bandwidth, is what
// their pipeline's steady state takes; ok is false where the server model
// lacks a rate or the traffic cannot be formed, and the caller keeps
// NCCL's model time.
func (d *Decomposer) linkBwPs(c *Coll) (ps int64, ok bool) {
	t, ok := d.busiestLinkPs(c, false)
	return int64(t), ok
}

// busiestLinkPs is the longest any GPU link takes (ps) for the bytes the
// decomposition puts on it: all of them, or, byGroup, only those of one
// group of coinciding rings (trafficGroups) at a time.
func (d *Decomposer) busiestLinkPs(c *Coll, byGroup bool) (float64, bool) {
	b, ok := d.busiestLinksPs(c, byGroup)
	return max(b.nv, b.nic), ok
}

// linkBusy is the longest a GPU's NVLink (nv) and its share of the NICs
// (nic) take (ps) for the bytes the decomposition puts on them, each way.
type linkBusy struct{ nv, nic float64 }

// busiestLinksPs is collective c's linkBusy (gpuTraffic's loads; byGroup
// as busiestLinkPs).
func (d *Decomposer) busiestLinksPs(c *Coll, byGroup bool) (linkBusy, bool) {
	loads, nv, nic, ok := d.gpuLoads(c, byGroup)
	if !ok {
		return linkBusy{}, false
	}
	var b linkBusy
	for _, l := range loads {
		b.nv = max(b.nv, l.nvOut/nv, l.nvIn/nv)
		if nic > 0 {
			b.nic = max(b.nic, l.nicOut/nic, l.nicIn/nic)
		}
	}
	return b, true
}

// gpuLoads sums the bytes the decomposition puts on each GPU's links
// (gpuTraffic): one load a GPU, or, byGroup, one a GPU and group of
// coinciding rings (trafficGroups); nv and nic are the links' rates.
func (d *Decomposer) gpuLoads(c *Coll, byGroup bool) (loads map[gpuGroup]*gpuLoad, nv, nic float64, ok bool) {
	loads = map[gpuGroup]*gpuLoad{}
	nv, nic, ok = d.gpuTraffic(c, func(g int32, group int) *gpuLoad {
		k := gpuGroup{g: g}
		if byGroup {
			k.group = group
		}
		l := loads[k]
		if l == nil {
			l = &gpuLoad{}
			loads[k] = l
		}
		return l
	})
	return loads, nv, nic, ok
}

// gpuGroup keys a GPU's load, by group of coinciding rings or not.
type gpuGroup struct {
	g     int32
	group int
}

// ringPhasePs is, for a ring collective, how long (ps per wire byte of one
// connection) the bytes of one ring's channels take on the GPU link they
// load most. Channels whose rings coincide (ringPeriod) start together and
// stay in phase, so on a link they share they pay their fixed work at the
// same time and then share the link among themselves: a connection's
// step of b bytes takes at least its fixed work plus b x this. Rings
// that differ are out of phase and hide one another's fixed work behind
// their bytes; those only add to the link's total (linkBwPs).
func (d *Decomposer) ringPhasePs(c *Coll) (float64, bool) {
	n := len(c.Ranks)
	if !ringRows(c.Plan.Algo, Op(c.Rec.Op)) || n < 2 {
		return 0, false
	}
	t, ok := d.busiestLinkPs(c, true)
	if !ok {
		return 0, false
	}
	// A connection's wire bytes over the collective (Traffic's ring term).
	steps := float64(n - 1)
	if Op(c.Rec.Op) == AllReduce {
		steps *= 2
	}
	conn := wireShare(c.Plan.Proto) * float64(c.Rec.Size) / float64(max(c.Plan.Channels, 1)) * steps / float64(n)
	if conn <= 0 {
		return 0, false
	}
	return t / conn, true
}

// nvlsTreePs is an NVLS-Tree AllReduce's time (ps) across servers under
// the transport's costs in closed form, the mechanism nvlsTree's flows
// carry: every channel's chunk goes through the same stages (the
// channels are cut alike), each stage its latency and step cost (the
// first chunk's: firstHop) plus the bytes the channels put at once on the
// GPU link it loads most. All channels upload together; they reach the
// tree their proxyPhase apart and share each stage's NIC directions with
// the channels there at once (processor sharing, psLeave):
//
//   - upload: each GPU sends its chunk to the NVSwitch (NVLink, at NVLS's
//     efficiency), after NVLink's hop latency and step cost;
//   - reduce: the switch returns each GPU its reduced shard;
//   - the tree up, one stage per height of the sending server in its
//     channel's server tree (trees alternate by channel), then down, one
//     stage per depth of the sending server: each a network hop's
//     latency and step cost plus the shards every channel sends out of
//     or into one GPU's NIC in that stage;
//   - multicast, where a server's tree ends (the root after the tree up,
//     each other server after the down stage reaching it): the GPU stores
//     its shard and the switch writes the chunk to it, over the channels
//     ending there at once.
//
// The first chunk takes the longest of these chains. The later ones
// follow through each stage at its cycle (the slowest connection's pace,
// steps x the longer of the step cost and the proxy's round, proxyRound;
// the NVLink's bytes of a chunk; that stage's bytes on its busiest NIC
// direction), then pay the later stages' bytes and the multicast:
//
//	T = base + max(chain + (K - 1) x max(pace, NVLink's),
//	               max over stages i of end_i + (K - 1) x cycle_i + the later stages' bytes + multicast,
//	               when the busiest NIC direction has crossed its chunks + multicast).
//
// A NIC direction's chunks of stage i can cross no sooner than stage i's
// first has, and those of earlier stages come one a cycle. One cycle of
// all stages' bytes on the busiest NIC (the former form, chain + (K-1) x
// cycle) put VP 4 x 8 H100 at 1.09-1.18 of flow granularity at 16-128
// MiB with proxy-op 0: the last stage's later chunks go at its own
// shards' pace.
//
// ok is false where the server model lacks a rate or the plan is not an
// NVLS-Tree AllReduce across servers under step costs.
func (d *Decomposer) nvlsTreePs(co *Coll, s stepCosts, nNodes int) (int64, bool) {
	pl := co.Plan
	m, f := d.Planner.M, d.Fabric
	if pl.NoOp || pl.Algo != AlgoNVLSTree || Op(co.Rec.Op) != AllReduce || nNodes < 2 || co.Rec.Size <= 0 ||
		s.intra == 0 && s.inter == 0 || m.NVLinkGBps <= 0 || m.NICs <= 0 || m.NICGBps <= 0 || f.GPUsPerServer <= 0 {
		return 0, false
	}
	k := d.cut()
	nv := m.NVLinkGBps * 1e-3 // bytes per ps
	nic := m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	eff := k.nvlsEff
	if eff <= 0 {
		eff = 1
	}
	channels := int64(max(pl.Channels, 1))
	active := min(channels, co.Rec.Size) // channels carrying data
	per := (co.Rec.Size + channels - 1) / channels
	chunk := max(co.nvlsTreeChunk(k, true), 1)
	chunks := (per + chunk - 1) / chunk
	ppn := int64(len(co.Ranks) / nNodes)
	b := min(chunk, per)
	shard := (b + ppn - 1) / ppn
	nvPs := func(n int64, x int64) float64 { return float64(n) * float64(nvlsWire(x, eff)) / nv }
	netHop := usToPs(pl.Lat.Inter) + s.inter

	// Channel c runs server tree c mod 2; n[w] channels run tree w.
	var trees [2]serverTree
	var height, depth [2][]int
	n := [2]int64{(active + 1) / 2, active / 2}
	levels := 0
	for w := range trees {
		t := newServerTree(nNodes, w)
		trees[w], height[w], depth[w] = t, make([]int, nNodes), make([]int, nNodes)
		for _, j := range t.order { // parents first
			if p := t.par[j]; p >= 0 {
				depth[w][j] = depth[w][p] + 1
			}
		}
		for i := len(t.order) - 1; i >= 0; i-- { // children first
			j := t.order[i]
			for _, kid := range t.kids[j] {
				height[w][j] = max(height[w][j], height[w][kid]+1)
			}
			levels = max(levels, height[w][j])
		}
	}
	// stage moves every channel's first chunk across a tree stage
	// (sends(w, j): to whom server j sends in tree w): each channel's shard
	// leaves its NIC a network hop after its chain reached the stage, and a
	// NIC direction shares its rate among the shards on it (psLeave).
	// With the proxy's cost, a GPU's proxy posts its channels' first
	// network steps a share of its round apart (proxyPhase), so the
	// channels reach the first stage that far apart; whether their shards
	// then overlap depends on how long those take on the NIC. Taking them
	// as alone (op 0.2 us: 0.4 us apart, 1.3 us a shard) made VP 4 x 8
	// H100 0.81-0.95 of flow granularity at 4-16 MiB.
	//
	// The multicast takes the channels ending at once: one a tree when
	// phased, all of them without the proxy's cost.
	phased := s.proxyOp > 0
	at := n // channels in a stage at once, per tree
	if phased {
		at = [2]int64{min(n[0], 1), min(n[1], 1)}
	}
	x := float64(shard) / nic
	// tc[c]: when channel c's chain reaches the next tree stage; its first
	// leaf step leaves its proxy phase late.
	tc := make([]float64, active)
	upload := float64(usToPs(pl.Lat.Intra)+s.intra) + nvPs(active, b)
	// The first loop's reduce work precedes its shard (nvlsTreeWorkPs).
	work := s.nvlsTreeWorkPs(shard)
	reduce := nvPs(active, shard) + float64(work)
	for c := range tc {
		tc[c] = upload + reduce + float64(proxyPhase(c, s.proxyOp))
	}
	var stages []nvlsStage // the tree's stages, in order
	stage := func(sends func(w, j int) []int) {
		load := map[[2]int64]bool{} // the shards a NIC direction carries per channel of each tree
		out, in := make([][2]int64, nNodes), make([][2]int64, nNodes)
		for w := range trees {
			for j := 0; j < nNodes; j++ {
				for _, to := range sends(w, j) {
					out[j][w]++
					in[to][w]++
				}
			}
		}
		most := int64(0) // the shards of all channels on the busiest NIC direction
		dirs := make([]float64, 2*nNodes)
		for j := range out {
			dirs[2*j] = float64(out[j][0]*n[0]+out[j][1]*n[1]) * x
			dirs[2*j+1] = float64(in[j][0]*n[0]+in[j][1]*n[1]) * x
			load[out[j]], load[in[j]] = true, true
			most = max(most, out[j][0]*n[0]+out[j][1]*n[1], in[j][0]*n[0]+in[j][1]*n[1])
		}
		next := slices.Clone(tc)
		for m := range load {
			var who []int
			var arrive, work []float64
			for c := range tc {
				if k := m[c%2]; k > 0 {
					who = append(who, c)
					arrive = append(arrive, tc[c]+float64(netHop))
					work = append(work, float64(k)*x)
				}
			}
			for i, t := range psLeave(arrive, work) {
				next[who[i]] = max(next[who[i]], t)
			}
		}
		copy(tc, next)
		if most > 0 {
			stages = append(stages, nvlsStage{end: slices.Max(tc), bytes: float64(most) * x, dirs: dirs})
		}
	}
	// A chunk's bytes on the busiest link: each GPU's NVLink carries its
	// upload and multicast store out, its reduced shard and the multicast
	// in; its NIC its tree stages' shards (nvlsStage.dirs).
	nvBusy := nvPs(active, b) + nvPs(active, shard)
	for u := 0; u < levels; u++ {
		stage(func(w, j int) []int {
			if p := trees[w].par[j]; p >= 0 && height[w][j] == u {
				return []int{p}
			}
			return nil
		})
	}
	// down[dd][c]: when channel c's down stage from depth dd begins.
	down := make([][]float64, levels+1)
	down[0] = slices.Clone(tc)
	for dd := 0; dd < levels; dd++ {
		stage(func(w, j int) []int {
			if depth[w][j] == dd {
				return trees[w].kids[j]
			}
			return nil
		})
		down[dd+1] = slices.Clone(tc)
	}
	chain := 0.0
	for j := 0; j < nNodes; j++ {
		for dd := 0; dd <= levels; dd++ {
			var ending int64 // channels whose tree ends at server j, depth dd, at once
			for w := range trees {
				if depth[w][j] == dd {
					ending += at[w]
				}
			}
			for c, t := range down[dd] {
				if depth[c%2][j] == dd {
					chain = max(chain, t+nvPs(ending, shard)+nvPs(ending, b))
				}
			}
		}
	}
	pace := max(s.steps(wire(shard, pl.Proto))*max(s.inter, proxyRound(int(channels), co.Rec.Size, s.proxyOp)), s.intra*s.steps(nvlsWire(b, eff)))
	// The last loop may be short: lastShard a GPU, frac of a loop's bytes.
	lastShard := (per - (chunks-1)*chunk + ppn - 1) / ppn
	frac := float64(lastShard) / float64(shard)
	later := func(bytes float64) float64 { // the later loops at a cycle of bytes
		if chunks < 2 {
			return 0
		}
		return max(float64(chunks-1)*float64(pace), (float64(chunks-2)+frac)*bytes)
	}
	t := chain + later(nvBusy)
	// A stage's later chunks follow its first at its cycle, then only
	// pay the later stages' bytes and the multicast; the NICs' bytes of
	// every chunk bound it too.
	tail := chain - slices.Max(tc)
	for i := len(stages) - 1; i >= 0; i-- {
		st := stages[i]
		t = max(t, st.end+later(st.bytes)+tail)
		tail += st.bytes
	}
	if work > 0 {
		// The reduce work paces the loops: each loop's reduced shard
		// waits for the loop before's work (nvls.go's pace), so the last
		// starts chunks works after the upload and pays its bytes alone.
		alone := func(sh, loop int64) float64 { // a loop's reduced shard sh, stages and multicast of loop bytes
			return nvPs(active, sh) + float64(len(stages))*float64(active)*float64(sh)/nic + nvPs(1, sh) + nvPs(1, loop)
		}
		t = max(t, upload+float64(chunks)*float64(work)+lastLoopPs(float64(work), alone(lastShard, lastShard*ppn), chunks-1, stages))
		if chunks > 1 {
			// A short last loop still follows the full one before it on
			// every tree connection: it ends its last stage's bytes and
			// its multicast after that one's end.
			t = max(t, upload+float64(chunks-1)*float64(work)+lastLoopPs(float64(work), alone(shard, b), chunks-2, stages)+float64(active)*float64(lastShard)/nic+nvPs(1, lastShard)+nvPs(1, lastShard*ppn))
		}
	}
	if len(stages) > 0 {
		// A NIC direction's chunks of stage i arrive from its first's start
		// on, at most one a cycle: what arrives after stage i's first
		// chunk crosses after it. The busiest direction's bytes in series
		// (stage 0's term) idle while the NVLink paces the early stages'
		// chunks and the later stages' have not come (0.91-0.95 of flow
		// granularity at 64-128 MiB on VP 4 x 8 H100, proxy-op 0.2).
		cyc := max(float64(pace), nvBusy)
		var nicEnd float64
		for dir := range stages[0].dirs {
			for i, si := range stages {
				from, work := si.end-si.bytes, 0.0
				for j, sj := range stages {
					k := float64(chunks-1) + frac
					if j < i {
						k = max(0, k-math.Floor((from-(sj.end-sj.bytes))/cyc)-1)
					}
					work += k * sj.dirs[dir]
				}
				nicEnd = max(nicEnd, from+work)
			}
		}
		t = max(t, nicEnd+chain-slices.Max(tc))
	}
	return usToPs(pl.Lat.Base) + int64(t), true
}

// lastLoopPs is how long (ps) an NVLS-Tree AllReduce's last loop takes
// from its reduce on when the reduce work w paces the loops (nvlsTreePs):
// the channels' later loops reach each tree stage in step, so each stage
// puts every channel's shard on a GPU's NIC at once, and the loop pays
// its bytes down the chain (alone: its reduced shard, the stages and the
// multicast) but not its hops' latencies and step costs, which were the
// first loop's. A loop that takes longer than w still shares the NICs
// with the loops before it: it waits for what of their busiest NIC
// direction's bytes a loop (stages' dirs) is left when it comes, the
// share of each one's time in the tree still ahead of it, taken as
// spread evenly over that time (before: the loops before it).
func lastLoopPs(w, alone float64, before int64, stages []nvlsStage) float64 {
	var load float64 // a loop's bytes on its busiest NIC direction
	for dir := range stages[0].dirs {
		var sum float64
		for _, st := range stages {
			sum += st.dirs[dir]
		}
		load = max(load, sum)
	}
	p := alone
	for range 8 { // the fixed point of p = alone + load x sum over j of (p - j w)+ / p
		var left float64
		for j := 1.0; j <= float64(before) && j*w < p; j++ {
			left += (p - j*w) / p
		}
		p = alone + load*left
	}
	return p
}

// nvlsStage is a tree stage of nvlsTreePs: when the first chunk's last
// channel has crossed it and the bytes every channel puts on its busiest
// NIC direction (ps).
type nvlsStage struct {
	end, bytes float64
	dirs       []float64 // each NIC direction's bytes a chunk (server j out: 2j, in: 2j+1)
}

// psLeave is when each of a link's transfers leaves (ps) when the link
// shares its rate equally among those sending (fluid's max-min share on
// one bottleneck): transfer i starts sending at arrive[i] and takes
// work[i] alone.
func psLeave(arrive, work []float64) []float64 {
	order := make([]int, len(arrive))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(arrive[a], arrive[b]) })
	left, rem := make([]float64, len(arrive)), slices.Clone(work)
	var on []int // sending now
	now, next := 0.0, 0
	for next < len(order) || len(on) > 0 {
		if len(on) == 0 {
			now = max(now, arrive[order[next]])
		}
		for next < len(order) && arrive[order[next]] <= now {
			on = append(on, order[next])
			next++
		}
		k := float64(len(on))
		least := math.Inf(1)
		for _, i := range on {
			least = min(least, rem[i])
		}
		dt := least * k
		if next < len(order) && arrive[order[next]]-now < dt {
			dt = arrive[order[next]] - now
		}
		now += dt
		kept := on[:0]
		for _, i := range on {
			if rem[i] -= dt / k; rem[i] <= 1e-6*work[i] {
				left[i] = now
				continue
			}
			kept = append(kept, i)
		}
		on = kept
	}
	return left
}

// treePs is a tree AllReduce's time (ps) under the transport's costs in
// closed form, the mechanism treeAllReduce's flows carry: a channel's
// pieces go up its rank tree and back down, each hop a connection that
// sends its pieces in order. The first piece pays every hop's latency and
// step cost (firstHop: L_h, the cost shared by the pieces of one NCCL
// step) before its bytes (b_h), and a later piece leaves a hop no sooner
// than its pace (the step cost x slots) or its bytes after the one
// before: c_h = max(pace_h, b_h). Along the slowest leaf's path up and
// back down, hop h's last piece leaves K - 1 cycles after its first, and
// the pieces behind it then only pay their bytes, so
//
//	T = base + max over h of (E_h + (K-1) c_h + sum of b over the hops after h),
//
// E_h being when the first piece has crossed hop h (the L and b of the
// hops up to h). The channels on a rail (ceil(channels / ppn)) run the
// same chain and the same NIC, alternating trees in which a server has up
// to two children: that many pieces share a hop's link at once in the
// steady state, NVLink inside a server, the GPU's NIC across; a piece
// going through crosses the NIC with its own tree's only (sameTree).
// Channels that differ share a link too, so the bytes on the busiest NIC
// and NVLink (busy) bound it from below as well, after the first piece's
// latencies (linkBusy.bound); and while the first piece climbs its
// server's chain, other channels' later pieces pile onto its NVLink hops
// (chainPile). ok is false where the server model lacks a rate or the
// plan is not a tree AllReduce under step costs.
func (d *Decomposer) treePs(co *Coll, s stepCosts, busy linkBusy) (int64, bool) {
	t, ok := d.treeTimes(co, s, busy)
	return t.ps, ok
}

// treeTimes is treePs's time and its fill: the base latency and the
// latencies of the first piece's path, longest over the trees, which a
// link carrying the tree's bytes idles through (linkBusy.bound). A fabric
// link beyond the NICs (an oversubscribed uplink) bounds the tree as the
// NIC does, fill plus its bytes, beside the pace of the pieces rather
// than after it (collTime.fill).
func (d *Decomposer) treeTimes(co *Coll, s stepCosts, busy linkBusy) (collTime, bool) {
	pl := co.Plan
	m, f := d.Planner.M, d.Fabric
	n := len(co.Ranks)
	if pl.NoOp || pl.Algo != AlgoTree || Op(co.Rec.Op) != AllReduce || n < 2 || co.Rec.Size <= 0 ||
		s.intra == 0 && s.inter == 0 || m.NVLinkGBps <= 0 || f.GPUsPerServer <= 0 {
		return collTime{}, false
	}
	k := d.cut()
	nNodes := len(f.nodesOf(co.Ranks))
	nv := m.NVLinkGBps * 1e-3 // bytes per ps
	nic := 0.0
	if m.NICs > 0 {
		nic = m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	}
	if nNodes > 1 && nic <= 0 {
		return collTime{}, false
	}
	channels := int64(max(pl.Channels, 1))
	per := (co.Rec.Size + channels - 1) / channels
	ck, div := co.treeChunk(k)
	ck = max(ck, 1)
	pieces := (per + ck - 1) / ck
	w := wire(min(ck, per), pl.Proto)
	ppn := int64(n / nNodes)
	share := float64((channels + ppn - 1) / ppn) // pieces on one link at once
	hopOf := func(a, b int, r role) treeHop {
		h, cost, rate := usToPs(pl.Lat.Intra), s.intra, nv
		intra := f.server(co.Ranks[a]) == f.server(co.Ranks[b])
		if !intra {
			h, cost, rate = usToPs(pl.Lat.Inter), s.inter, nic
		}
		one := float64(w) / rate
		x := share * one
		if s.treeFs > 0 {
			// runTreeSplit's step on the sender's block paces it, and the
			// first piece pays a whole step's cost, or its share under
			// treeShare (cctx.treeStep)
			pace := float64(s.serial*s.steps(w)/max(div, 1) + r.inputs*w*s.treeFs*10/(r.tenths*1000))
			if s.treeShare {
				cost /= max(div, 1)
			}
			lat := float64(h + cost)
			if s.treeWhole && !s.treeShare && !intra { // as treeStep: a share skips the wait
				lat += pace * float64(max(div, 1))
			}
			return treeHop{lat: lat, bytes: x, cycle: max(pace, x), one: one, pace: pace, intra: intra}
		}
		cost /= max(div, 1)
		pace := float64(cost * s.steps(w))
		return treeHop{lat: float64(h + cost), bytes: x, cycle: max(pace, x), one: one, pace: pace, intra: intra}
	}
	var worst, fill float64
	for ch := 0; ch < int(min(channels, 2*ppn)); ch++ { // the distinct trees
		parent, children, root := rankTree(f, co.Ranks, ch)
		// The slowest leaf's path to the root, by first-piece time.
		var path, down []treeHop
		best := -1.0
		for leaf := range parent {
			if len(children[leaf]) > 0 {
				continue // its path is part of a leaf's below it, which takes longer
			}
			var up, dn []treeHop
			total := 0.0
			for p := leaf; parent[p] >= 0; p = parent[p] {
				h := hopOf(p, parent[p], treeRole(p, root, children, true))
				up = append(up, h)
				dn = append(dn, hopOf(parent[p], p, treeRole(parent[p], root, children, false)))
				total += h.lat + h.bytes
			}
			if total > best {
				best, path, down = total, up, dn
			}
		}
		for i := len(down) - 1; i >= 0; i-- { // and back down
			path = append(path, down[i])
		}
		var e, after, lat float64
		for i, h := range path {
			if !h.intra { // a piece crosses with its own tree's channels
				path[i].bytes = h.one * float64(sameTree(int64(ch), channels, ppn))
			}
			after += path[i].bytes
			lat += h.lat
		}
		fill = max(fill, lat)
		worst = max(worst, busy.bound(path))
		pile := chainPile{ch: int64(ch), channels: channels, ppn: ppn, pieces: pieces, share: share, one: path[0].one, pace: path[0].pace}
		climbing := nNodes > 1 // rankTree's chains start on rotated rails
		for _, h := range path {
			x := h.bytes
			if climbing = climbing && h.intra; climbing {
				x = h.one * pile.next(e, h.lat)
			}
			e += h.lat + x
			after -= h.bytes
			worst = max(worst, e+float64(pieces-1)*h.cycle+after)
		}
	}
	t := collTime{ps: usToPs(pl.Lat.Base) + int64(worst)}
	if nNodes > 1 {
		t.fill = usToPs(pl.Lat.Base) + int64(fill)
	}
	return t, true
}

// sameTree is how many channels run channel ch's rank tree on its rail
// (rankTree: rail c mod ppn, tree c / ppn mod 2), whose first pieces
// cross a server's NIC together; the other tree's go the other way on
// two servers, or at another level.
func sameTree(ch, channels, ppn int64) int64 {
	var n int64
	for c := ch % ppn; c < channels; c += ppn {
		if c/ppn%2 == ch/ppn%2 {
			n++
		}
	}
	return n
}

// bound is how long the path takes at least for the bytes on its busiest
// NIC and NVLink (treePs). The NIC's wait for the first piece's latencies
// all along the path: every channel reaches the network after the climb
// and comes back only after the root, so the NIC idles through them. A
// GPU's NVLink does not: rankTree rotates the chains, so it carries other
// channels' pieces, up and down, while one's first piece pays latencies
// elsewhere: its bytes wait for the latencies up to the path's first
// NVLink hop and are followed by those after its last one. With all the
// latencies before the NVLink's bytes too, OCI's 2 x 8 A100 tree LL128 (a100, 200 Gb/s NICs, NVLink the busiest) was
// 1.21 of flow granularity at 8 MiB and 1.04-1.06 at 128 KiB-4 MiB.
func (b linkBusy) bound(path []treeHop) float64 {
	var lat, nvPre, nvPost float64
	seen := false // a NVLink hop
	for _, h := range path {
		lat += h.lat
		switch {
		case h.intra && !seen:
			seen, nvPre = true, lat
		case h.intra:
			nvPost = 0
		case seen:
			nvPost += h.lat
		}
	}
	t := lat + b.nic
	if seen {
		t = max(t, nvPre+b.nv+nvPost)
	}
	return t
}

// treeHop is a hop of a tree's path in treePs: its first piece's latency
// and step cost, the bytes of the pieces on its link at once, its cycle
// (the longer of its pace and those bytes), a piece's bytes alone on the
// link, its pace, and whether it stays inside a server.
type treeHop struct {
	lat, bytes, cycle, one, pace float64
	intra                        bool
}

// chainPile is how long, in a piece's bytes alone on the link, channel
// ch's first piece takes on a GPU's NVLink while it climbs its server's
// chain (treePs). rankTree starts channel c's chain on rail c mod ppn, so
// the GPU that sends ch's piece on the chain's hop j is the one that sends
// channel ch-k's (mod ppn) on that one's hop j-k, for k = 1..j. Each of
// those connections has sent its first piece, k hops ahead, and streams
// its later ones (the flows have no slots to hold them back), each no
// sooner than its pace after the one before: it shares the link with the
// first piece if it still has pieces when that one's bytes start, after
// its latency and step cost. m such streams take m x one / pace of the
// link, or a fair share each when that is more, and the first pieces of
// ch's rail share the rest. Without that pile-up the closed form was 0.97
// of flow granularity on the p4de sweep from 128 MiB (a100-efa, tree
// Simple: 8 MiB pieces, 7 hops of 35 us took 1018 us, not 276).
type chainPile struct {
	ch, channels, ppn, pieces int64
	share                     float64   // the first pieces on ch's rail (treePs)
	one, pace                 float64   // a piece's bytes alone on the link, and its pace (ps)
	starts                    []float64 // when the first piece started each hop so far
}

// next is the pile on the chain's next hop, which the first piece starts
// at time at (from the leaf's start) and sends on after lat.
func (c *chainPile) next(at, lat float64) float64 {
	c.starts = append(c.starts, at)
	j := int64(len(c.starts) - 1)
	stream := float64(c.pieces-1) * max(c.pace, c.one) // a stream's later pieces, alone
	n, m := c.share, 0.0
	for k := int64(1); k <= j; k++ {
		if c.starts[j-k+1]+stream <= at+lat {
			continue // its later pieces have all gone
		}
		m += float64(c.channels / c.ppn)
		if ((c.ch-k)%c.ppn+c.ppn)%c.ppn < c.channels%c.ppn {
			m++
		}
	}
	if left := 1 - m*c.one/max(c.pace, 1); m > 0 && left > n/(n+m) {
		return n / left // the streams' pace leaves the first pieces more
	}
	return n + m
}

// ringLinkPhases is, for a ring collective, how long (ps per wire byte of
// one connection) the most loaded GPU's NVLink and NIC share take for the
// bytes of all its channels at once (all) and of one group of coinciding
// rings (grp, trafficGroups).
func (d *Decomposer) ringLinkPhases(c *Coll) (nvAll, nicAll, nvGrp, nicGrp float64, ok bool) {
	n := len(c.Ranks)
	if !ringRows(c.Plan.Algo, Op(c.Rec.Op)) || n < 2 {
		return 0, 0, 0, 0, false
	}
	steps := float64(n - 1)
	if Op(c.Rec.Op) == AllReduce {
		steps *= 2
	}
	conn := wireShare(c.Plan.Proto) * float64(c.Rec.Size) / float64(max(c.Plan.Channels, 1)) * steps / float64(n)
	if conn <= 0 {
		return 0, 0, 0, 0, false
	}
	for _, byGroup := range []bool{false, true} {
		loads, nv, nic, ok := d.gpuLoads(c, byGroup)
		if !ok {
			return 0, 0, 0, 0, false
		}
		var tnv, tnic float64
		for _, l := range loads {
			tnv = max(tnv, l.nvOut/nv, l.nvIn/nv)
			if nic > 0 {
				tnic = max(tnic, l.nicOut/nic, l.nicIn/nic)
			}
		}
		if byGroup {
			nvGrp, nicGrp = tnv/conn, tnic/conn
		} else {
			nvAll, nicAll = tnv/conn, tnic/conn
		}
	}
	return nvAll, nicAll, nvGrp, nicGrp, true
}

// ringPathPs is an LL or LL128 ring's time (ps) under the transport's
// costs in closed form, the mechanism flow granularity's transfers carry
// (ringConns.send, cctx.ringHop with stepCosts.roundPaced). A step of b
// wire bytes on a connection waits for its data (the upstream hop's step
// before it), then for its hop latency and step cost or its slices' fixed
// work f, whichever is longer, then sends its bytes; its network steps are
// paced by the proxy round already in f, not by the step cost. LL and
// LL128 rings move a channel's data in one loop up to 18 MiB (LL128's
// 576000-byte chunk x ranks), so a datum's path is the diagonal of the
// ring's steps: P hops (n-1, 2(n-1) for AllReduce) one after the other,
// each its latency-or-work plus its bytes, of which the ring's network
// hops, nNodes of them (2 nNodes for AllReduce) when the window omits an
// intra-server hop, cost
//
//	net = b x relay + max(L_net + cost_net, f) + b x nic
//
// (PXN's relay over NVLink runs while the ring's other connections wait
// their fixed work, so it shares the link with its own ring's relays
// only) and the others
//
//	hop = max(L_nv + cost_nv, f) + b x nv.
//
// A hop's bytes share a GPU's NVLink with the other rings' connections
// out of it. Every ring starts in phase, and inside one server they stay
// in phase (all of a GPU's connections at once, nvIn:
//
//	hop_in = max(L_nv + cost_nv, f) + b x nvIn).
//
// Across servers a network hop makes its channel lag the channels that
// have not crossed a server yet, by its latency and step cost and its NIC
// share beyond an NVLink step, and the rings crossing at other positions
// lag by other amounts: after the datum's first server crossing (its
// first ppn - 1 hops run in phase) the rings meet at no set offset and a
// hop's bytes go at its own group of coinciding rings' share (grp,
// trafficGroups), as the flows show (a 4 x 8 AllGather of 16 or 32 MiB: a
// GPU's NVLink steps take the in-phase share at the start, their group's
// alone from the 3rd to 7th step on, on IB and EFA alike):
//
//	I_in = min(ppn - 1, P - I), sum = I_in x hop_in + (P - I - I_in) x (f + b x grp) + I x net.
//
// (Before, a lagging half's share, or the in-phase total less the lag
// modulo a step's cycle: the p5 AllGather at 32 MiB on 4 x 8 and 64 MiB
// on 8 x 8, the IB one at 32 MiB on 8 x 8 and the p5 4 x 8 AllReduce at 64
// MiB were 1.056, 1.076, 1.061 and 1.075 of flow granularity; now 1.010,
// 1.000, 1.006 and 0.998.) Later loops wait f on every hop instead of
// latency and cost.
//
// A network connection also runs its own P steps in order (ringConns.send
// queues them), each its fixed work and then its bytes at its NIC share,
// nic: with PXN its next step's relay runs meanwhile, and the NIC's
// connections are coinciding rings' (one group), in phase. A flow waits
// its step latency less the path's link latencies (NetPathPs), which it
// adds after its last byte has left, and its connection's next step
// starts when that byte has left (the backends' timing model), so each
// step costs f - path + b x nic, the first one its latency and step cost
// and the relay beyond f, and the last one the path:
//
//	conn = max(L_net + cost_net, f) - f + b x relay + P x (f - path + b x nic) + path.
//
// On the 4 x 8 AWS p5 AllReduce's Ring LL128 (128 MiB to 1 GiB, 560 KB
// steps with 8.4 us of fixed work) it is the slower path: without it
// collective granularity was 0.80-0.86 of flow granularity, and 1.03 with
// it but without the path's 1 us (EFA's NIC and leaf links).
//
// All the bytes of the busiest link over its rate (linkBwPs) bound it
// from below:
//
//	T = base + max(sum over loops, conn over loops, bw).
//
// The rings leave their in-phase start because their network steps, the
// slower, pace the channels apart. Where a hop's bytes in phase take
// longer on the NVLink than on the NIC (nvIn > nic: 16 A100 channels in
// phase take 58 ps a byte of one connection on its NVLink, 40 on an
// uncapped 400G NIC), the NVLink paces every channel alike and keeps them in step (the
// flows of a 4 x 8 A100 AllReduce of 64 MiB: an NVLink step takes its
// fixed work plus nearly its bytes in phase, 12.4-14.0 us against 14.2):
// each NVLink connection then runs its own steps in order at the in-phase
// share, as conn's, less what the network-fed channels' lag leaves
// unshared (lockBytes),
//
//	lock = base + P x (f + lockBytes) + max(L_nv + cost_nv, f) - f,
//
// returned apart (0 when nvIn <= nic), since a fabric that slows the
// network steps beyond it dissolves it (collective record's
// nvlink_lock_ps): on 4 x 8 A800s (16 channels, 400G NICs, which their
// PCIe caps at 226.4G) 16, 32 and 64 MiB are 0.978, 0.983 and 0.979 of
// flow granularity (1.120, 1.079 and 1.032 with the whole in-phase
// bytes; TestRingNVLinkLock). On A100s the cap dissolves the lock; with
// 400G uncapped they gave 0.978, 0.985 and 0.987 (1.120, 1.080 and 1.027
// whole; 16 and 64 MiB 0.978 and 0.778 without a lock).
//
// conn (base + conn over loops, 0 on one server) is returned apart too
// (the record's ring_conn_ps): a fabric that slows a network step's bytes
// beyond the NIC's share slows every step of a network connection, but
// only the datum's network hops of its path (collload.go, aloneWith).
//
// Worked by hand on 2 x 4 GPUs (TestRingPathPs, TestRingPathConnPs). ok is false where the
// server model lacks a rate or co is not an LL or LL128 ring under step
// costs.
func (d *Decomposer) ringPathPs(co *Coll, k cut, s stepCosts, nNodes int, bw int64) (ps, lock, conn int64, ok bool) {
	pl := co.Plan
	n := len(co.Ranks)
	op := Op(co.Rec.Op)
	if pl.NoOp || pl.Algo != AlgoRing || pl.Proto == Simple || !ringRows(pl.Algo, op) || n < 2 || co.Rec.Size <= 0 || s.intra == 0 && s.inter == 0 {
		return 0, 0, 0, false
	}
	_, nicAll, nvGrp, _, ok := d.ringLinkPhases(co)
	if !ok {
		return 0, 0, 0, false
	}
	if lb, ok := d.linkBwPs(co); ok {
		bw = lb
	}
	// The ring's own hops in phase: without PXN's relays, which send
	// while the ring's other connections wait their fixed work.
	nr := *co
	nr.Plan.PXN = false
	nvIn, _, _, _, ok := d.ringLinkPhases(&nr)
	if !ok {
		return 0, 0, 0, false
	}
	steps, inter := RingCrossings(op, n, nNodes)
	relay := 0.0
	if pl.PXN && nNodes > 1 && n > nNodes {
		relay = 1
	}
	channels := int64(max(pl.Channels, 1))
	per := (co.Rec.Size + channels - 1) / channels
	loopBytes := int64(n) * max(co.chunk(n, k), 1)
	hopIntra, hopInter := usToPs(pl.Lat.Intra), usToPs(pl.Lat.Inter)
	loop := func(payload int64, first bool) float64 {
		b := wire((payload+int64(n)-1)/int64(n), pl.Proto)
		f := s.serial * s.slices(b)
		li, ln := f, f
		if first {
			li, ln = max(hopIntra+s.intra, f), max(hopInter+s.inter, f)
		}
		x := float64(b)
		in := float64(li) + x*nvIn
		hopN := float64(ln) + x*nicAll + relay*x*nvGrp
		intra := float64(steps - inter)
		if nNodes < 2 {
			return intra*(float64(li)+x*nvIn) + float64(inter)*hopN
		}
		// The datum's first hops, before its first server crossing, run
		// in phase; after it the rings meet at no set offset and a hop's
		// bytes go at its own group's share.
		early := min(float64(n/nNodes-1), intra)
		return early*in + (intra-early)*(float64(li)+x*nvGrp) + float64(inter)*hopN
	}
	// connLoop: a network connection's own steps in order, each its fixed
	// work and then its bytes at its NIC share (PXN's relay of its next
	// step runs meanwhile), after the first step's latency and cost.
	connLoop := func(payload int64, first bool) float64 {
		if nNodes < 2 {
			return 0
		}
		b := wire((payload+int64(n)-1)/int64(n), pl.Proto)
		f := s.serial * s.slices(b)
		x := float64(b)
		pathLat := min(float64(d.Fabric.NetPathPs), float64(f))
		t := float64(steps) * (float64(f) - pathLat + x*nicAll)
		if first {
			t += float64(max(hopInter+s.inter, f)-f) + relay*x*nvGrp + pathLat
		}
		return t
	}
	// nvLoop: an NVLink connection's own steps in order, as connLoop's,
	// each its fixed work and then its bytes at the in-phase share, less
	// what its channels' lag leaves unshared (lockBytes).
	nvLoop := func(payload int64, first bool) float64 {
		b := wire((payload+int64(n)-1)/int64(n), pl.Proto)
		f := s.serial * s.slices(b)
		li, ln := f, f
		if first {
			li, ln = max(hopIntra+s.intra, f), max(hopInter+s.inter, f)
		}
		x := float64(b)
		t := float64(steps) * (float64(f) + lockBytes(x, float64(li), float64(ln)+relay*x*nvGrp, nvIn, nvGrp, nicAll))
		return t + float64(li-f)
	}
	var t, tc, tn float64
	for done, first := int64(0), true; done < per; first = false {
		b := min(loopBytes, per-done)
		if !first && b == loopBytes {
			full := (per - done) / loopBytes
			t += float64(full) * loop(b, false)
			tc += float64(full) * connLoop(b, false)
			tn += float64(full) * nvLoop(b, false)
			done += full * loopBytes
			continue
		}
		t += loop(b, first)
		tc += connLoop(b, first)
		tn += nvLoop(b, first)
		done += b
	}
	base := usToPs(pl.Lat.Base)
	if nNodes > 1 && nvIn > nicAll {
		lock = base + int64(tn)
	}
	if nNodes > 1 {
		conn = base + int64(tc)
	}
	return base + int64(max(t, tc, float64(bw))), lock, conn, true
}

// lockBytes is how long (ps) a locked ring's NVLink step takes for its b
// bytes on a GPU's NVLink (ringPathPs' lock). The rings start in phase,
// but a channel fed by the network gets its first data later than one
// fed over NVLink when the network hop (ln, PXN's relay included, plus b
// x nic) is longer than the NVLink hop in phase (li + b x nvIn); sooner
// data waits for its connection's own earlier steps, so only a late one
// lags. Processor sharing keeps a lag, and the channels' lags spread
// over 0 to it, so a step overlaps the in-phase window less half the lag,
// at the least its group's share (b x nvGrp). The flows, as the fraction
// of the in-phase bytes a step of the chain took ((F - base)/P - f) against
// 1 - lag/2B, by hand: 4 x 8 A100s, 400G uncapped (before topogen's PCIe
// cap; 800G likewise), 16 channels, AllReduce 32 / 64 MiB 0.81 / 0.95
// (lag 0.44 / 0.14 of the bytes: 0.78 / 0.93), 800G 16 MiB 0.71 (0.71:
// 0.65); 2 x 8 AllReduce and AllGather 16 MiB 0.78 / 0.74
// (0.44: 0.78). Where the network hop is the shorter (800G 64 MiB, H100
// 800G) the flows lose 0.10-0.16 of the in-phase bytes all the same: not
// modelled, the lock stays whole there (1.06-1.09x the flows, as before).
func lockBytes(b, li, ln, nvIn, nvGrp, nic float64) float64 {
	inPhase := b * nvIn
	lag := ln + b*nic - (li + inPhase)
	return max(b*nvGrp, inPhase-max(lag, 0)/2)
}

// a2aChain is the longest of a class of proxies' network connections
// (ps), each starting when its first step is posted (op ps an op; front,
// the class's frontier, a2aClass): from any level q on, the most
// connections one proxy posted no sooner send their last pieces (last ps
// each, on the NIC together) after paced ps of earlier pieces, and all
// their bytes (whole ps each) at the NIC's rate.
func a2aChain(front []int32, op int64, paced, last, whole float64) float64 {
	chain := 0.0
	for q, rest := range front {
		if rest > 0 {
			at := float64(int64(q) * op)
			chain = max(chain, at+paced+float64(rest)*last, at+float64(rest)*whole)
		}
	}
	return chain
}

// allToAllPs is an AllToAll's time (ps) across servers under the
// transport's costs in closed form, the mechanism allToAllPXN's and
// allToAllDirect's flows carry (p2pSteps): each network connection (with
// PXN, a rail GPU's to one remote rank, gathering its server's hand-offs)
// moves its share in K pieces (p2pPieces), the first after the hop's
// latency and a step's cost (and, with PXN, after the first pieces'
// hand-offs over the rail GPU's NVLink), each later one no sooner than
// an interval after the one before (its steps x the longer of the step
// cost and the proxy's round over the connections it serves). The last
// piece then takes its row's bytes, every connection's last piece out of
// the GPU's NIC share at once; all the bytes of the busiest link over
// its rate (linkBwPs) bound it from below:
//
//	T = base + latency + cost + hand-off + max((K - 1) x interval + row, bw),
//
// where each connection counts from its first step's posting (a2aChain).
//
// ok is false where the server model lacks a rate or the plan is not an
// AllToAll across servers under step costs.
func (d *Decomposer) allToAllPs(co *Coll, s stepCosts, nNodes int) (int64, bool) {
	pl := co.Plan
	m, f := d.Planner.M, d.Fabric
	n := len(co.Ranks)
	if pl.NoOp || pl.Algo != AlgoPXN && pl.Algo != AlgoDirect || nNodes < 2 || co.Rec.Size <= 0 || n < 2 ||
		s.intra == 0 && s.inter == 0 || m.NVLinkGBps <= 0 || m.NICs <= 0 || m.NICGBps <= 0 || f.GPUsPerServer <= 0 {
		return 0, false
	}
	bw, ok := d.busiestLinkPs(co, false)
	if !ok {
		return 0, false
	}
	nv := m.NVLinkGBps * 1e-3 // bytes per ps
	nic := m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	share := co.Rec.Size / int64(n)
	parts := max(pl.Channels, 1)
	// Each class of proxies (a2aProxies: one on a group aligned to
	// servers; a server with fewer of the group's ranks relays more
	// connections, with PXN each gathering fewer shares, and its
	// proxies' rounds are longer) chains its own connections.
	t := 0.0
	for _, cl := range a2aLayoutCached(f.nodesOf(co.Ranks), n, parts, pl.Algo == AlgoPXN, s.maxRecvs).classes {
		pieces, interval := a2aPace(share, parts, pl.Chunk, d.cut().maxChunks, cl.ops, s.p2pPace(), s.proxyOp)
		piece := float64(share) / float64(pieces)
		handoff := float64((cl.local-1)*cl.conns) * piece / nv
		piece *= float64(cl.local) // with PXN, the server's hand-offs gathered
		chain := a2aChain(cl.front, s.proxyOp, float64((pieces-1)*interval), piece/nic, float64(pieces)*piece/nic)
		t = max(t, handoff+max(chain, bw))
	}
	lat := usToPs(pl.Lat.Inter) + s.inter
	return usToPs(pl.Lat.Base) + lat + int64(t), true
}
