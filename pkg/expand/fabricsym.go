package expand

import (
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Symmetric groups across servers (SymmetryRules.Fabric). The sibling
// groups of an EP AllToAll on Spectrum-X each keep to rails of their own:
// every pair of a group's ranks has one route (no ECMP choice), and each
// hop of it is a link between a GPU of the group and a switch (its NVLink
// to the NVSwitch, its NIC link to its rail's leaf). No two groups share
// such a link, and no flow of another node crosses one while the node
// runs when every node that may send from or to one of those GPUs is an
// ancestor or a descendant of it in the DAG: routes never pass through a
// GPU, so a link with a GPU end carries only flows from or to that GPU.
// With the same hop kinds, pair by pair, and the same links shared by the
// same pairs (a bijection between the groups' links), the max-min rates of
// each group's flows are the first group's: the first group's flows time
// the node exactly, as for TP groups inside a server (symmetry.go).
//
// The resources here are GPUs. A node's are the GPUs its flows may start
// or end at: a transfer's two ends; a COLL node's ranks, every GPU of
// their servers when it may relay through another GPU (PXN on a ring, or
// NVLS). Walking the stream in order, each GPU keeps the latest nodes
// that touched it and are not an ancestor of a later toucher (an
// antichain); a node that is not a descendant of all of them may overlap
// with them there: the GPU is tainted for both, and for the GPU's older
// touchers that are not its ancestors (those newer than its newest
// ancestor among the GPU's last few touchers). A group on a tainted GPU
// runs in full (a pipeline transfer of a stage's first rank overlaps the
// next stage's collectives on that rank's links); the first of the
// others stands for the rest, when there are two or more.

// maxFabricPairs bounds the rank pairs a COLL node's groups are checked
// over (size² × groups); a larger node is run in full.
const maxFabricPairs = 1 << 24

// maxAntichain bounds the nodes kept per GPU; past it every later node
// touching the GPU is run in full.
const maxAntichain = 64

// maxHistory is how many of a GPU's latest touchers are kept to find,
// when a node may overlap one of them, its newest ancestor there.
const maxHistory = 4

// maxVisits bounds the DAG walk's visits over the whole stream (ancestor
// queries); past it no more node is marked.
const maxVisits = 1 << 28

// findFabricSymmetry marks in alone (and fabric) the COLL nodes of in whose
// sibling groups span servers but run exactly as their first group (see
// above), and puts in runs, for a node where that is not just its first
// group, the groups to run: those on a GPU where another node may overlap
// (each its own), and the first of the others, which stands for the rest.
// It returns how many it marked.
func findFabricSymmetry(in *flowset.Set, r *route.Router, rules SymmetryRules, alone, fabric []bool, runs map[int32][]int32, reps map[int32]int32) int {
	t := in.Topology
	n := in.DAG.Len()
	if multiNIC(t) {
		return 0 // a connection's port is its own choice
	}
	for _, l := range t.Links {
		if int(l.A) < t.GPUs && int(l.B) < t.GPUs {
			return 0 // GPU-to-GPU links: a route may pass through a GPU
		}
	}
	for i := int32(0); int(i) < n; i++ {
		for _, d := range in.DAG.Deps(i) {
			if d >= i {
				return 0
			}
		}
	}
	gpus := t.GPUs
	serverGPUs := map[int32][]int32{}
	for g := 0; g < gpus; g++ {
		s := t.Nodes[g].Server
		serverGPUs[s] = append(serverGPUs[s], int32(g))
	}
	// tainted: per node, the GPUs where it may overlap with another.
	tainted := make([][]int32, n)
	taint := func(i, g int32) {
		if t := tainted[i]; len(t) == 0 || t[len(t)-1] != g {
			tainted[i] = append(t, g)
		}
	}
	anti := make([][]int32, gpus)
	hist := make([][]int32, gpus)      // the latest maxHistory touchers, oldest first
	tspans := make([][][2]int32, gpus) // tainted: the touchers p with lo < p <= hi, disjoint, rising
	collKey := make([]int64, n)        // per COLL node: its resCache key
	poisoned := make([]bool, gpus)
	stamp := make([]int32, gpus)    // per GPU: node + 1 during its resources
	seen := make([]int32, n)        // per node: querying node + 1 when reached
	candSeen := make([]int32, n)    // per node: querying node + 1 when a candidate
	resCache := map[int64][]int32{} // per group id and relay bit: the GPUs
	var res, cand, stack []int32
	visits := 0
	for i := int32(0); int(i) < n; i++ {
		f := in.Flow(i)
		res = res[:0]
		switch f.Kind {
		case flowset.Transfer:
			if f.Src == f.Dst {
				continue
			}
			for _, v := range [2]int32{f.Src, f.Dst} {
				if v >= 0 && int(v) < gpus && stamp[v] != i+1 {
					stamp[v] = i + 1
					res = append(res, v)
				}
			}
		case flowset.Coll:
			rec := in.Collectives[f.Coll]
			algo := strings.ToLower(rec.Algorithm)
			groups, _ := groupRanks(in, rec.Group)
			// PXN relays a ring's hops between servers only.
			relays := (rec.PXN && spans(t, groups)) || strings.Contains(algo, "nvls") || strings.Contains(algo, "pxn")
			key := rec.Group<<1 | int64(b2i(relays))
			gs, ok := resCache[key]
			if !ok {
				for _, g := range groups {
					for _, rank := range g {
						if rank < 0 || int(rank) >= gpus {
							continue
						}
						if relays {
							for _, v := range serverGPUs[t.Nodes[rank].Server] {
								if stamp[v] != i+1 {
									stamp[v] = i + 1
									gs = append(gs, v)
								}
							}
						} else if stamp[rank] != i+1 {
							stamp[rank] = i + 1
							gs = append(gs, rank)
						}
					}
				}
				resCache[key] = gs
			}
			res = append(res, gs...)
			collKey[i] = key
		default:
			continue
		}
		if len(res) == 0 {
			continue
		}
		// The latest touchers of these GPUs, once each.
		cand = cand[:0]
		low := i
		for _, g := range res {
			if poisoned[g] {
				taint(i, g)
			}
			for _, p := range anti[g] {
				if candSeen[p] != i+1 {
					candSeen[p] = i + 1
					cand = append(cand, p)
					low = min(low, p)
				}
			}
			for _, p := range hist[g] {
				low = min(low, p)
			}
		}
		// Walk i's ancestors down to the oldest of them.
		if len(cand) > 0 {
			stack = append(stack[:0], i)
			for len(stack) > 0 {
				v := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, d := range in.DAG.Deps(v) {
					if d >= low && seen[d] != i+1 {
						seen[d] = i + 1
						stack = append(stack, d)
						if visits++; visits > maxVisits {
							return 0
						}
					}
				}
			}
		}
		for _, g := range res {
			a := anti[g][:0]
			overlap := false
			for _, p := range anti[g] {
				if seen[p] != i+1 { // may overlap with i on g
					taint(i, g)
					taint(p, g)
					a = append(a, p)
					overlap = true
				}
			}
			if overlap {
				// A toucher of g dropped from the antichain (an ancestor
				// of a later one) may overlap i too. Those older than
				// i's newest ancestor on g are its ancestors (had one
				// not been, it would have overlapped that ancestor and
				// been tainted then); taint the others, all of them
				// when no recent toucher of g is i's ancestor.
				from := int32(-1)
				for _, p := range hist[g] {
					if seen[p] == i+1 {
						from = max(from, p)
					}
				}
				for _, p := range anti[g] {
					if seen[p] == i+1 {
						from = max(from, p)
					}
				}
				tspans[g] = addSpan(tspans[g], from, i)
			}
			if h := hist[g]; len(h) < maxHistory {
				hist[g] = append(h, i)
			} else {
				copy(h, h[1:])
				h[len(h)-1] = i
			}
			a = append(a, i)
			if len(a) > maxAntichain {
				poisoned[g] = true
				tspans[g] = addSpan(tspans[g], -1, i)
				for _, p := range a {
					taint(p, g)
				}
				a = a[:0]
			}
			anti[g] = a
		}
	}

	// The spans' touchers: only COLL nodes' taints are read.
	for i := int32(0); int(i) < n; i++ {
		if in.Flow(i).Kind != flowset.Coll {
			continue
		}
		for _, g := range resCache[collKey[i]] {
			sp := tspans[g]
			k, _ := slices.BinarySearchFunc(sp, i, func(s [2]int32, v int32) int { return int(s[1] - v) })
			if k < len(sp) && sp[k][0] < i {
				taint(i, g)
			}
		}
	}

	fa := fabricAnalysis{in: in, r: r, rules: rules, geom: map[int64]bool{}, owner: make([]int32, r.DirLinks()),
		img: make([]route.DirLink, r.DirLinks()), imgOf: make([]int32, r.DirLinks()), mark: make([]int32, gpus)}
	marked := 0
	for i := int32(0); int(i) < n; i++ {
		f := in.Flow(i)
		if f.Kind != flowset.Coll || alone[i] {
			continue
		}
		rec := in.Collectives[f.Coll]
		algo := strings.ToLower(rec.Algorithm)
		groups, _ := groupRanks(in, rec.Group)
		// NVLS sends to switches; a ring under PXN relays its hops
		// between servers through GPUs that are not its group's: either
		// leaves the group's own links.
		if strings.Contains(algo, "nvls") || (rec.PXN && !pxnAlgo(rec) && spans(t, groups)) {
			continue
		}
		if !fa.alike(rec.Group, pxnAlgo(rec)) {
			continue
		}
		// The groups on a GPU where another node may overlap run in
		// full; the first of the others stands for the rest.
		dirty := map[int32]bool{}
		for _, g := range tainted[i] {
			dirty[g] = true
		}
		var run []int32
		rep, clean := int32(-1), 0
		for gi, g := range groups {
			ok := true
			for _, r := range g {
				ok = ok && !dirty[r]
			}
			switch {
			case !ok:
				run = append(run, int32(gi))
			case rep < 0:
				rep = int32(gi)
				run = append(run, rep)
				clean++
			default:
				clean++
			}
		}
		if clean < 2 {
			continue
		}
		alone[i], fabric[i] = true, true
		if len(run) > 1 || rep != 0 {
			runs[i] = run
			reps[i] = int32(slices.Index(run, rep))
		}
		marked++
	}
	return marked
}

// addSpan adds to sp, disjoint spans (lo, hi] in rising order, the span
// (lo, hi], hi past them all.
func addSpan(sp [][2]int32, lo, hi int32) [][2]int32 {
	for len(sp) > 0 && lo <= sp[len(sp)-1][1] {
		lo = min(lo, sp[len(sp)-1][0])
		sp = sp[:len(sp)-1]
	}
	return append(sp, [2]int32{lo, hi})
}

// spans reports whether some group has ranks in two servers.
func spans(t *stream.Topology, groups [][]int32) bool {
	for _, g := range groups {
		for _, r := range g {
			if server(t, r) != server(t, g[0]) {
				return true
			}
		}
	}
	return false
}

// pxnAlgo reports whether a collective runs PXN's AllToAll (PairsOf).
func pxnAlgo(rec *stream.Collective) bool {
	return strings.Contains(strings.ToLower(rec.Algorithm), "pxn")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type fabricAnalysis struct {
	in    *flowset.Set
	r     *route.Router
	rules SymmetryRules
	geom  map[int64]bool
	owner []int32         // per directed link: group + 1
	img   []route.DirLink // per directed link of group 0: its image in the group being checked
	imgOf []int32         // per directed link of group 0: that group + 1 (img valid)
	mark  []int32         // per GPU: group + 1
	buf   []route.DirLink
	hops  [][]route.DirLink // group 0's route per pair

	local, perServer []int32 // localIndexes
}

func (a *fabricAnalysis) alike(id int64, pxn bool) bool {
	key := id<<1 | int64(b2i(pxn))
	if ok, done := a.geom[key]; done {
		return ok
	}
	groups, _ := groupRanks(a.in, id)
	ok := a.check(groups, PairsOf(a.in.Topology, groups[0], pxn))
	a.geom[key] = ok
	return ok
}

// PairsOf is which ordered pairs of a group's positions (i*m + j) its
// collective may send between: under PXN's AllToAll, the pairs inside a
// server and, across servers, a destination and its proxy (the sender's
// server's rank at the destination's place in its own server, as
// collective.allToAllPXN picks it); otherwise every pair.
func PairsOf(t *stream.Topology, g []int32, pxn bool) []bool {
	m := len(g)
	ok := make([]bool, m*m)
	if !pxn {
		for k := range ok {
			ok[k] = true
		}
		return ok
	}
	var servers []int32
	var lists [][]int
	local := make([]int, m)
	srv := make([]int, m)
	for p, r := range g {
		s := int32(-1)
		if r >= 0 && int(r) < t.GPUs {
			s = t.Nodes[r].Server
		}
		k := slices.Index(servers, s)
		if k < 0 {
			k = len(servers)
			servers = append(servers, s)
			lists = append(lists, nil)
		}
		local[p], srv[p] = len(lists[k]), k
		lists[k] = append(lists[k], p)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			switch {
			case i == j:
			case srv[i] == srv[j]:
				ok[i*m+j] = true
			default:
				la := lists[srv[i]]
				if la[local[j]%len(la)] == i {
					ok[i*m+j] = true
				}
			}
		}
	}
	return ok
}

// check reports whether groups each route every ordered pair of their
// ranks on one path of links between a GPU of the group and a switch,
// no link shared by two groups, and every group's routes the image of the
// first's under one bijection of links of equal bandwidth and latency.
func (a *fabricAnalysis) check(groups [][]int32, pairs []bool) bool {
	t := a.in.Topology
	if len(groups) < 2 || len(groups[0]) < 2 {
		return false
	}
	m := len(groups[0])
	if int64(m)*int64(m)*int64(len(groups)) > maxFabricPairs {
		return false
	}
	if a.local == nil {
		a.local, a.perServer = localIndexes(t)
	}
	key0 := layoutKey(t, a.local, a.perServer, groups[0])
	clear(a.owner)
	clear(a.imgOf)
	clear(a.mark)
	a.hops = a.hops[:0]
	for gi, g := range groups {
		if len(g) != m || layoutKey(t, a.local, a.perServer, g) != key0 {
			return false
		}
		for _, rank := range g {
			if rank < 0 || int(rank) >= t.GPUs || a.mark[rank] != 0 {
				return false
			}
			a.mark[rank] = int32(gi + 1)
		}
		pair := 0
		for i, src := range g {
			for j, dst := range g {
				if i == j || !pairs[i*m+j] {
					continue
				}
				path, unique, err := a.r.OnlyPath(a.buf[:0], src, dst)
				a.buf = path
				if err != nil || !unique {
					return false
				}
				if gi == 0 {
					a.hops = append(a.hops, slices.Clone(path))
				} else if len(a.hops[pair]) != len(path) {
					return false
				}
				for h, dl := range path {
					l := &t.Links[dl.Link()]
					ga, gb := int(l.A) < t.GPUs, int(l.B) < t.GPUs
					if ga == gb {
						return false // switch to switch (or GPU to GPU): shared beyond the group
					}
					v := l.A
					if gb {
						v = l.B
					}
					if a.mark[v] != int32(gi+1) {
						return false // a GPU of another group, or none's
					}
					if o := a.owner[dl]; (o != 0 && o != int32(gi+1)) || (a.rules.LinkOK != nil && !a.rules.LinkOK(dl)) {
						return false
					}
					a.owner[dl] = int32(gi + 1)
					if gi == 0 {
						continue
					}
					d0 := a.hops[pair][h]
					l0 := &t.Links[d0.Link()]
					if l0.BWbps != l.BWbps || l0.LatencyPs != l.LatencyPs {
						return false
					}
					// One bijection: d0 always maps to dl. Injective as
					// every dl is owned by this group and mapped from one d0
					// (checked through owner + the image's uniqueness below).
					if a.imgOf[d0] == int32(gi+1) {
						if a.img[d0] != dl {
							return false
						}
					} else {
						a.imgOf[d0], a.img[d0] = int32(gi+1), dl
					}
				}
				pair++
			}
		}
		if gi > 0 && !a.injective(gi) {
			return false
		}
	}
	return true
}

// injective reports whether group gi's images of group 0's links are
// distinct.
func (a *fabricAnalysis) injective(gi int) bool {
	seen := map[route.DirLink]bool{}
	for _, p := range a.hops {
		for _, d0 := range p {
			if a.imgOf[d0] != int32(gi+1) {
				return false
			}
		}
	}
	for _, p := range a.hops {
		for _, d0 := range p {
			seen[a.img[d0]] = true
		}
	}
	distinct := map[route.DirLink]bool{}
	for _, p := range a.hops {
		for _, d0 := range p {
			distinct[d0] = true
		}
	}
	return len(seen) == len(distinct)
}
