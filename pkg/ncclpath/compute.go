package ncclpath

import (
	"fmt"
)

// Compute reproduces what NCCL computes before it searches rings and trees
// (ncclTopoComputePaths, ncclTopoTrimSystem, ncclTopoComputePaths again):
// for every GPU and NIC the best path to every other GPU and NIC with its
// type, bottleneck bandwidth and hop count, the P2P and GDR verdicts, the
// PXN rewrites and each GPU's NICs. It does not modify sys.
//
// An 8-GPU server takes 40-80 µs (BenchmarkComputeDGXH100 on the 2-core
// build machine), so a caller handling a cluster computes once per distinct
// server model, not once per server.
func Compute(sys *System, opt Options) (*Result, error) {
	if err := sys.Validate(); err != nil {
		return nil, err
	}
	p, err := opt.profile()
	if err != nil {
		return nil, err
	}
	c := newComputer(sys, p, nil, false)
	if err := c.run(); err != nil {
		return nil, err
	}
	// NCCL trims GPUs outside the rank's domain (and the NICs when the
	// communicator is all local), then recomputes every path from scratch.
	drop, dropNets := c.trim(opt)
	if drop != nil || dropNets {
		c = newComputer(sys, p, drop, dropNets)
		if err := c.run(); err != nil {
			return nil, err
		}
		c.trimmed = drop
	}
	return c.result(), nil
}

// glink is one directed link of the computation graph.
type glink struct {
	to  int32
	typ LinkType
	bw  float64
}

// pathRec is the path from a node to a base node, NCCL's ncclTopoLinkList.
// The route (the nodes after the source, ending at the base) lives in the
// computer's arena at [off, off+count).
type pathRec struct {
	bw    float64
	off   int32
	count int32
	typ   PathType
}

// computer holds one run of the path computation over a graph built from a
// System (minus trimmed nodes). Graph nodes are numbered densely.
type computer struct {
	sys *System
	p   *profile

	kind   []NodeKind
	sysIdx []int32           // graph node → System.Nodes index
	adj    [][]glink         // per graph node, in NCCL's link order
	nodes  [numKinds][]int32 // graph nodes of each kind, in index order
	kidx   []int32           // graph node → index within its kind

	slot     []int32 // graph node → row of paths, -1 if not a BFS base
	nn       int
	paths    []pathRec // row-major: slot*nn + node; row = paths to that base
	arena    []int32
	frontier []int32
	next     []int32
	mark     []uint32
	epoch    uint32

	localCPU []int32 // per GPU index: graph node of its closest CPU
	p2p      []P2P   // GPU×GPU verdicts, src*G+dst
	trimmed  []bool  // System GPU index → removed by trimming

	// scratch buffers reused by the local NIC/GPU helpers
	scratch []int32
	lgBuf   []int32
	planBuf []int32
	plans   []netPlan
}

// Link phases: NCCL creates the PCI tree (with NIC ports) first, then
// NVLinks, C2C links, Broadcom peer links, and inter-CPU links last. The
// order decides which of two equally good paths a BFS keeps.
var linkPhases = [...]LinkType{LinkPCI, LinkNVL, LinkC2C, LinkLOC}

func newComputer(sys *System, p *profile, dropGPU []bool, dropNets bool) *computer {
	c := &computer{sys: sys, p: p}
	gid := make([]int32, len(sys.Nodes))
	for i := range sys.Nodes {
		n := &sys.Nodes[i]
		if (n.Kind == GPU && dropGPU != nil && dropGPU[n.Index]) || (n.Kind == NET && dropNets) {
			gid[i] = -1
			continue
		}
		g := int32(len(c.kind))
		gid[i] = g
		c.kind = append(c.kind, n.Kind)
		c.sysIdx = append(c.sysIdx, int32(i))
		c.kidx = append(c.kidx, int32(len(c.nodes[n.Kind])))
		c.nodes[n.Kind] = append(c.nodes[n.Kind], g)
	}
	c.nn = len(c.kind)
	c.adj = make([][]glink, c.nn)

	for _, phase := range linkPhases {
		for _, l := range sys.Links {
			t := l.Type
			if t == LinkNET {
				t = LinkPCI // NIC ports are created with the PCI tree
			}
			if t != phase || (l.Type == LinkC2C && !p.c2cLinks) {
				continue
			}
			a, b := gid[l.A], gid[l.B]
			if a < 0 || b < 0 {
				continue
			}
			bw := l.BW
			if l.NVLinks > 0 {
				bw = float64(l.NVLinks) * NVLinkBW(sys.Nodes[l.A].GPU.SM, p.ver)
			}
			c.connect(a, b, l.Type, bw)
			if !l.OneWay {
				c.connect(b, a, l.Type, bw)
			}
		}
	}
	// Every pair of CPUs is joined by an inter-socket link whose bandwidth
	// NCCL takes from the first CPU; a SYS link given explicitly in the
	// System overrides it for its pair.
	cpus := c.nodes[CPU]
	if len(cpus) > 1 {
		def := interCPUBW(sys.Nodes[c.sysIdx[cpus[0]]].CPU, p.ver)
		explicit := map[[2]int32]float64{}
		for _, l := range sys.Links {
			if l.Type == LinkSYS && gid[l.A] >= 0 && gid[l.B] >= 0 {
				explicit[[2]int32{gid[l.A], gid[l.B]}] = l.BW
				if !l.OneWay {
					explicit[[2]int32{gid[l.B], gid[l.A]}] = l.BW
				}
			}
		}
		for _, a := range cpus {
			for _, b := range cpus {
				if a == b {
					continue
				}
				bw, ok := explicit[[2]int32{a, b}]
				if !ok {
					bw = def
				}
				c.connect(a, b, LinkSYS, bw)
			}
		}
	}
	// ncclTopoSortSystem: in the PCI tree, the link up to the parent comes last.
	for g := range c.adj {
		par := sys.Nodes[c.sysIdx[g]].Parent
		k := c.kind[g]
		if par < 0 || (k != PCI && k != GPU && k != NIC) || gid[par] < 0 {
			continue
		}
		links := c.adj[g]
		for i, l := range links {
			if l.to == gid[par] && l.typ == LinkPCI {
				copy(links[i:], links[i+1:])
				links[len(links)-1] = l
				break
			}
		}
	}

	c.slot = make([]int32, c.nn)
	nb := 0
	for g := range c.slot {
		switch c.kind[g] {
		case CPU, GPU, NET, NVS:
			c.slot[g] = int32(nb)
			nb++
		default:
			c.slot[g] = -1
		}
	}
	c.paths = make([]pathRec, nb*c.nn)
	c.arena = make([]int32, 0, nb*c.nn*4)
	c.mark = make([]uint32, c.nn)
	return c
}

// connect adds bandwidth to the directed link a→b of type t, as
// ncclTopoConnectNodes does: links of the same type to the same node
// aggregate, and the list stays sorted by decreasing bandwidth with a new
// or grown link placed after the links at least as fast.
func (c *computer) connect(a, b int32, t LinkType, bw float64) {
	links := c.adj[a]
	i := 0
	for i < len(links) && !(links[i].to == b && links[i].typ == t) {
		i++
	}
	if i == len(links) {
		links = append(links, glink{to: b, typ: t})
	}
	links[i].bw += bw
	for i > 0 && links[i-1].bw < links[i].bw {
		links[i-1], links[i] = links[i], links[i-1]
		i--
	}
	c.adj[a] = links
}

// at returns the path from node to base.
func (c *computer) at(base, node int32) *pathRec {
	return &c.paths[int(c.slot[base])*c.nn+int(node)]
}

func (c *computer) route(p *pathRec) []int32 { return c.arena[p.off : p.off+p.count] }

// run is ncclTopoComputePaths.
func (c *computer) run() error {
	for _, k := range [...]NodeKind{CPU, GPU, NET, NVS} {
		for _, b := range c.nodes[k] {
			c.bfs(b)
		}
	}
	gpus, nets := c.nodes[GPU], c.nodes[NET]
	c.localCPU = make([]int32, len(gpus))
	for i, g := range gpus {
		if c.localCPU[i] = c.closestCPU(g); c.localCPU[i] < 0 {
			return fmt.Errorf("GPU%d (%s) cannot reach any CPU", i, c.sys.Nodes[c.sysIdx[g]].BusID)
		}
	}

	// GPUs that may not use P2P talk through the CPU local to the receiver.
	G := len(gpus)
	c.p2p = make([]P2P, G*G)
	for gi, g := range gpus {
		for pi, p := range gpus {
			v := c.checkP2P(p, g)
			c.p2p[pi*G+gi] = v
			if !v.OK {
				c.interStep(c.localCPU[gi], p, g)
			}
		}
		// Isolated containers can use neither P2P nor SHM: NCCL marks the
		// peer as reachable only through the network and trims it later.
		for _, p := range gpus {
			if p != g && c.gpu(p).Container != c.gpu(g).Container {
				c.at(g, p).typ = PathNET
			}
		}
	}

	// 2.27+: a GPU on Grace reaching a NIC below its own CPU gets P2C.
	if c.p.p2c {
		for gi, g := range gpus {
			cpu := c.localCPU[gi]
			cand := nets
			if c.p.p2cLocal {
				cand = c.local(g, NET, c.scratch[:0])
				c.scratch = cand
			}
			for _, n := range cand {
				if mergeType(c.at(cpu, g).typ, c.at(cpu, n).typ, true) == PathP2C {
					c.at(n, g).typ = min(PathP2C, c.at(n, g).typ)
					c.at(g, n).typ = min(PathP2C, c.at(g, n).typ)
				}
			}
		}
	}

	for _, n := range nets {
		for gi, g := range gpus {
			if c.p.pxn {
				c.tryPXN(g, n)
			}
			// GPUDirect RDMA refused: both directions go through the CPU
			// local to the GPU. From 2.21 only paths better than PHB are
			// checked (worse ones already cross a CPU).
			if c.p.gdrBelowPHB && c.at(n, g).typ >= PathPHB {
				continue
			}
			if !c.checkGDR(g, n, false) {
				cpu := c.localCPU[gi]
				c.interStep(cpu, n, g)
				c.interStep(cpu, g, n)
			}
		}
	}
	return nil
}

// bfs is ncclTopoSetPaths: a level-synchronous BFS that fills, for every
// node, its path to base.
func (c *computer) bfs(base int32) {
	row := c.paths[int(c.slot[base])*c.nn : int(c.slot[base]+1)*c.nn]
	for i := range row {
		row[i] = pathRec{typ: PathDIS}
	}
	row[base] = pathRec{bw: LocBW, typ: PathLOC, off: int32(len(c.arena))}
	c.frontier = append(c.frontier[:0], base)
	p := c.p
	for len(c.frontier) > 0 {
		c.next = c.next[:0]
		c.epoch++
		for _, node := range c.frontier {
			path := row[node] // read now: NCCL follows a pointer, so an update made earlier in this level counts
			nodeKind := c.kind[node]
			for _, l := range c.adj[node] {
				rem := l.to
				remKind := c.kind[rem]
				// A GPU other than the base relays only NVLink traffic to
				// another GPU, one intermediate GPU at most (NVB).
				if nodeKind == GPU && node != base {
					if !p.gpuTransit || p.nvbDisable || l.typ != LinkNVL || remKind != GPU || path.count > 1 {
						continue
					}
				}
				bw := min(path.bw, l.bw)
				count := path.count + 1
				t := c.stepType(&path, l, nodeKind, remKind, count)
				rp := &row[rem]
				var better bool
				switch p.rule {
				case ruleBottleneck:
					better = rp.bw < bw
				case ruleHopsThenBW:
					better = (rp.bw == 0 || rp.count > path.count) && rp.bw < bw
				default:
					better = t < rp.typ || (t == rp.typ && (bw > rp.bw || (bw == rp.bw && count < rp.count)))
				}
				if !better {
					continue
				}
				off := int32(len(c.arena))
				c.arena = append(c.arena, node)
				c.arena = append(c.arena, c.arena[path.off:path.off+path.count]...)
				*rp = pathRec{bw: bw, off: off, count: count, typ: t}
				if c.mark[rem] != c.epoch && (p.gpuTransit || remKind != GPU) {
					c.mark[rem] = c.epoch
					c.next = append(c.next, rem)
				}
			}
		}
		c.frontier, c.next = c.next, c.frontier
	}
}

// stepType is the type of path + link: the link's own type adjusted by
// NCCL's rules, then the worse of that and the path's type.
func (c *computer) stepType(path *pathRec, l glink, nodeKind, remKind NodeKind, count int32) PathType {
	t := PathType(l.typ) // link and path types share values
	if l.typ == LinkNET {
		t = PathLOC // only the NIC→GPU part matters
	}
	if c.p.legacyPXB {
		// ≤2.7: a PCI hop on a path of more than 3 hops means PXB.
		if t == PathPIX && (nodeKind == PCI || remKind == PCI) && count > 3 {
			t = PathPXB
		}
	} else if nodeKind == PCI && remKind == PCI {
		t = PathPXB // one switch to another
	}
	if l.typ == LinkPCI && (nodeKind == CPU || remKind == CPU) {
		t = PathPHB // through a host bridge
	}
	if nodeKind == GPU && path.typ == PathNVL && t == PathNVL && count > 1 {
		t = PathNVB // NVLink relayed by a GPU
	}
	return max(path.typ, t)
}

// mergeType combines the types of two concatenated paths (addInterStep):
// the worse one, except that C2C followed by PHB is P2C from 2.27.
func mergeType(a, b PathType, p2c bool) PathType {
	hi, lo := max(a, b), min(a, b)
	if p2c && hi == PathPHB && lo == PathC2C {
		return PathP2C
	}
	return hi
}

// interStep reroutes src→dst as src→via followed by via→dst.
func (c *computer) interStep(via, src, dst int32) {
	p1, p2 := *c.at(via, src), *c.at(dst, via)
	off := int32(len(c.arena))
	c.arena = append(c.arena, c.route(&p1)...)
	c.arena = append(c.arena, c.route(&p2)...)
	t := mergeType(p1.typ, p2.typ, c.p.p2c)
	if c.kind[via] == GPU {
		t = PathPXN
	}
	*c.at(dst, src) = pathRec{bw: min(p1.bw, p2.bw), off: off, count: p1.count + p2.count, typ: t}
}

// closestCPU is ncclGetLocalCpu: the CPU the fewest hops away (first on ties).
func (c *computer) closestCPU(g int32) int32 {
	best, hops := int32(-1), int32(0)
	for _, cpu := range c.nodes[CPU] {
		h := c.at(cpu, g).count
		if h > 0 && (hops == 0 || h < hops) {
			best, hops = cpu, h
		}
	}
	return best
}

func (c *computer) gpu(g int32) *GPUInfo { return &c.sys.Nodes[c.sysIdx[g]].GPU }
func (c *computer) net(n int32) *NetInfo { return &c.sys.Nodes[c.sysIdx[n]].Net }

// P2P is the verdict of NCCL's P2P check for an ordered GPU pair.
type P2P struct {
	OK   bool `json:"ok"`   // the P2P transport may be used
	Read bool `json:"read"` // P2P read (only A100↔A100 over NVLink)
}

// p2pLevel is the worst path type that may use P2P.
func (c *computer) p2pLevel() PathType {
	if c.p.hasP2PUser {
		return c.p.p2pUser
	}
	var cpu CPUInfo
	if len(c.nodes[CPU]) > 0 {
		cpu = c.sys.Nodes[c.sysIdx[c.nodes[CPU][0]]].CPU // NCCL looks at the first CPU only
	}
	switch c.p.p2pDefault {
	case p2pLegacy:
		if cpu.Arch == ArchARM {
			return PathPXB
		}
		if cpu.Arch == ArchX86 && cpu.Vendor == VendorIntel {
			if cpu.model() == modelBDW {
				return PathPXB
			}
			return PathPHB
		}
		return PathSYS
	case p2pSysExceptIntelARM:
		if cpu.Arch == ArchARM || (cpu.Arch == ArchX86 && (cpu.Vendor == VendorIntel || cpu.Vendor == VendorZhaoxin)) {
			return PathPXB
		}
		return PathSYS
	}
	if cpu.Arch == ArchX86 && cpu.Vendor == VendorAMD && len(c.nodes[GPU]) <= 2 {
		return PathSYS
	}
	return PathPXB
}

// checkP2P is ncclTopoCheckP2p for the path from GPU src to GPU dst.
func (c *computer) checkP2P(src, dst int32) P2P {
	if c.gpu(src).Container != c.gpu(dst).Container {
		return P2P{}
	}
	t := c.at(dst, src).typ
	v := P2P{OK: t <= c.p2pLevel()}
	v.Read = v.OK && t == PathNVL && c.gpu(src).SM == 80 && c.gpu(dst).SM == 80
	return v
}

// checkGDR is ncclTopoCheckGdr: may GPU g and NET n use GPUDirect RDMA?
// read is the send side (the NIC reads GPU memory).
func (c *computer) checkGDR(g, n int32, read bool) bool {
	gi := c.gpu(g)
	if !c.net(n).GDR || !gi.GDR {
		return false
	}
	if read {
		switch c.p.gdrRead {
		case Off:
			return false
		case Auto:
			// Keep PCIe free for peers: pre-Ampere GPUs read over GDR only
			// when their GPU traffic goes over NVLink (or they are alone).
			if c.p.gdrReadAll || gi.SM < 80 {
				nvlink := len(c.nodes[GPU]) == 1
				for _, o := range c.nodes[GPU] {
					if o != g && c.at(o, g).typ == PathNVL {
						nvlink = true
						break
					}
				}
				if !nvlink {
					return false
				}
			}
		}
	}
	dist := c.at(n, g).typ
	if dist == PathPXN {
		// A PXN send is done by the proxy GPU: its distance counts.
		if proxy := c.firstGPU(c.at(n, g)); proxy >= 0 {
			dist = c.at(n, proxy).typ
		}
	}
	if c.p.gdrC2CMap && dist == PathP2C {
		dist = PathC2C
	}
	return dist <= c.p.gdrLevel
}

// firstGPU returns the first GPU on a path's route, -1 if none: the
// intermediate of an NVB path, the proxy of a PXN path.
func (c *computer) firstGPU(p *pathRec) int32 {
	for _, x := range c.route(p) {
		if c.kind[x] == GPU {
			return x
		}
	}
	return -1
}

// tryPXN sends GPU g's traffic to NET n through the GPU NCCL considers local
// to n when that GPU is one NVLink hop away, close to the NIC, and either
// faster to it or g's own path crosses a CPU.
func (c *computer) tryPXN(g, n int32) {
	peer := c.localGPU(n)
	if peer < 0 || peer == g {
		return
	}
	relay := PathPXB
	if c.p.pxnC2C {
		relay = PathP2C
	}
	pn, gn := c.at(n, peer), c.at(n, g)
	if pn.typ > relay || c.at(g, peer).typ > PathNVL {
		return
	}
	if pn.bw <= gn.bw && gn.typ <= c.p.pxnWorse {
		return
	}
	if c.p.pxnPeerGDR && !c.checkGDR(peer, n, true) {
		return
	}
	c.interStep(peer, g, n)
}

// local is ncclTopoGetLocal: the nodes of kind (NETs from a GPU, GPUs from
// a NET) that src reaches with the highest bandwidth, ties broken by the
// best path type, in index order.
func (c *computer) local(src int32, kind NodeKind, buf []int32) []int32 {
	maxBW, minType := 0.0, PathDIS
	for _, x := range c.nodes[kind] {
		p := c.at(x, src)
		if p.bw > maxBW || (p.bw == maxBW && p.typ < minType) {
			maxBW, minType, buf = p.bw, p.typ, buf[:0]
		}
		if p.bw > 0 && p.bw == maxBW && p.typ == minType {
			buf = append(buf, x)
		}
	}
	return buf
}

// netPlan is ncclTopoGetLocalNet for every channel at once: on channel ch,
// GPU g uses nets[(base + ch%period) % len(nets)].
type netPlan struct {
	nets         []int32
	base, period int
}

func (c *computer) planFor(g int32, buf []int32) netPlan {
	nets := c.local(g, NET, buf)
	if len(nets) == 0 {
		return netPlan{}
	}
	c.scratch = c.local(nets[0], GPU, c.scratch[:0])
	lg := len(c.scratch)
	base := c.gpu(g).Dev
	if isPow2(len(nets)) {
		base = mirrorBits(base, len(nets))
	}
	period := 1
	if lg > 0 {
		period = (len(nets) + lg - 1) / lg
	}
	return netPlan{nets: nets, base: base, period: period}
}

func (pl netPlan) at(ch int) int32 {
	return pl.nets[(pl.base+ch%pl.period)%len(pl.nets)]
}

// localGPU is ncclTopoGetLocalGpu: the first of n's local GPUs that uses n
// on some channel, scanning channels in order; -1 if none does.
func (c *computer) localGPU(n int32) int32 {
	c.lgBuf = c.local(n, GPU, c.lgBuf[:0])
	lg := c.lgBuf
	plans := c.plans[:0]
	buf := c.planBuf[:0]
	limit := 0
	for _, g := range lg {
		start := len(buf)
		pl := c.planFor(g, buf[start:])
		buf = append(buf[:start], pl.nets...) // keep each plan's NICs apart
		pl.nets = buf[start:len(buf):len(buf)]
		plans = append(plans, pl)
		limit = max(limit, pl.period)
	}
	c.plans, c.planBuf = plans, buf
	// Channel ch and ch+period pick the same NIC, so scanning past the
	// longest period finds nothing new.
	limit = min(limit, c.p.maxChannels)
	for ch := 0; ch < limit; ch++ {
		for i, g := range lg {
			if len(plans[i].nets) > 0 && plans[i].at(ch) == n {
				return g
			}
		}
	}
	return -1
}

func isPow2(v int) bool { return v > 0 && v&(v-1) == 0 }

// mirrorBits reverses the low log2(pow2) bits of val (NCCL spreads GPUs
// over a power-of-two number of NICs this way).
func mirrorBits(val, pow2 int) int {
	m := 0
	for b, mb := 1, pow2>>1; b < pow2; b, mb = b<<1, mb>>1 {
		if val&b != 0 {
			m |= mb
		}
	}
	return m
}

// trim is ncclTopoTrimSystem: it returns the System GPU indices to drop (nil
// if none) and whether to drop the NICs.
func (c *computer) trim(opt Options) ([]bool, bool) {
	gpus := c.nodes[GPU]
	domains := make([]int, len(gpus))
	myDomain := 0
	for g := range gpus {
		domains[g] = g
		for p := 0; p < g; p++ {
			if c.at(gpus[p], gpus[g]).typ < PathNET {
				domains[g] = min(domains[g], domains[p])
			}
		}
		if c.gpu(gpus[g]).Rank == opt.Rank {
			myDomain = domains[g]
		}
	}
	var drop []bool
	kept := 0
	for g, d := range domains {
		if d == myDomain {
			kept++
			continue
		}
		if drop == nil {
			drop = make([]bool, c.sys.Count(GPU))
		}
		drop[c.sys.Nodes[c.sysIdx[gpus[g]]].Index] = true
	}
	dropNets := opt.NRanks > 0 && kept == opt.NRanks && len(c.nodes[NET]) > 0
	return drop, dropNets
}
