package expand

import (
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Symmetric groups. A COLL node stands for its group and the sibling groups
// that run its collective at the same time, and expanding it makes the
// flows of all of them. When every group sits inside one server and its
// flows can only cross links that touch its own GPUs there (NVLink to the
// server's NVSwitches, which link nowhere else, so no other route crosses
// them), the groups share no link. When moreover every other node that
// could move bytes inside those servers is an ancestor or a descendant of
// this one in the DAG, no other flow shares those links while the node
// runs. Each group then sees what the first sees: the same flows (the
// expansion of a group depends on its size and the collective, not on its
// ranks' numbers), released at the same instant (the node's), over links
// of the same bandwidth and latency on unique routes (checked pair by
// pair). They end together, and the first group's flows alone time the
// node. A model in which nothing else couples the groups may run only
// those: the fluid model (max-min rates on a group's links depend only on
// the flows over them), the packet model under SymmetryRules. In AICB's
// GPT-13B on 1024 GPUs, 116 M of the 120 M flows are in TP collectives of
// 128 groups.

// maxSymmetryBits bounds the ancestor sets FindSymmetry keeps (stream nodes
// times nodes that move bytes inside a server, in bits); a larger stream
// expands every group.
const maxSymmetryBits = 1 << 28

// maxSymmetryRanks bounds the ranks FindSymmetry reads over all COLL
// nodes' groups.
const maxSymmetryRanks = 1 << 27

// SymmetryRules are what a model needs, beyond equal links, for a group to
// stand for its siblings.
type SymmetryRules struct {
	// WholeServers: no two groups in one server (a switch's shared
	// buffer couples the flows crossing it).
	WholeServers bool
	// LinkOK, when set, must hold for every directed link a group's flows
	// may cross (say, no random loss or marking there: draws from one
	// generator couple the groups).
	LinkOK func(route.DirLink) bool
	// Fabric: groups that span servers may stand for their siblings too
	// when each keeps to links of its own (fabricsym.go). Only a model in
	// which flows on disjoint links do not interact at all may set it.
	Fabric bool
}

// Symmetry marks the COLL nodes whose first group may stand for all.
type Symmetry struct {
	alone  []bool // by stream flow index
	fabric []bool // by stream flow index: marked by fabricsym.go
	Nodes  int    // COLL nodes marked
	// FabricNodes of them have groups that span servers (fabricsym.go).
	FabricNodes int
	runs        map[int32][]int32 // fabricsym.go: the groups a node runs, when not its first alone
	reps        map[int32]int32   // and which of them stands for the others
}

// Alone reports whether COLL node i's first group stands for its siblings.
func (s *Symmetry) Alone(i int32) bool { return s != nil && int(i) < len(s.alone) && s.alone[i] }

// Fabric reports whether COLL node i's first group stands for siblings
// that span servers (fabricsym.go).
func (s *Symmetry) Fabric(i int32) bool {
	return s != nil && int(i) < len(s.fabric) && s.fabric[i]
}

// Run is the positions, among COLL node i's groups (its own, then its
// siblings'), of the groups it runs when Alone: its first only (nil), or
// those listed, ascending, of which the one at rep stands for the groups
// not listed and the others for themselves (fabricsym.go).
func (s *Symmetry) Run(i int32) (groups []int32, rep int32) {
	if s == nil {
		return nil, 0
	}
	return s.runs[i], s.reps[i]
}

// FindSymmetry marks the COLL nodes of in whose sibling groups would run
// exactly as their first group (see above, and fabricsym.go under
// rules.Fabric) under rules; nil when there are none.
func FindSymmetry(in *flowset.Set, r *route.Router, rules SymmetryRules) *Symmetry {
	if in.CollNodes == 0 {
		return nil
	}
	n := in.DAG.Len()
	sym := &Symmetry{alone: make([]bool, n)}
	sym.Nodes = findServerSymmetry(in, r, rules, sym.alone)
	if rules.Fabric {
		sym.fabric, sym.runs, sym.reps = make([]bool, n), map[int32][]int32{}, map[int32]int32{}
		sym.FabricNodes = findFabricSymmetry(in, r, rules, sym.alone, sym.fabric, sym.runs, sym.reps)
		sym.Nodes += sym.FabricNodes
	}
	if sym.Nodes == 0 {
		return nil
	}
	return sym
}

// findServerSymmetry marks in alone the COLL nodes whose groups each sit
// in a server of their own (see above) and returns how many.
func findServerSymmetry(in *flowset.Set, r *route.Router, rules SymmetryRules, alone []bool) int {
	t := in.Topology
	n := in.DAG.Len()
	servers := 0
	for _, v := range t.Nodes {
		servers = max(servers, int(v.Server)+1)
	}
	if servers < 2 {
		return 0
	}
	a := symAnalysis{in: in, r: r, rules: rules, closed: make([]bool, servers), switches: make([][]int32, servers),
		geom: map[int64]bool{}, mark: make([]int32, len(t.Nodes)), owner: make([]int32, r.DirLinks())}
	for i := range a.closed {
		a.closed[i] = true
	}
	for _, l := range t.Links {
		va, vb := &t.Nodes[l.A], &t.Nodes[l.B]
		if va.Server == vb.Server {
			continue
		}
		for _, v := range [2]*stream.Node{va, vb} {
			if v.Server >= 0 && v.Kind != stream.NodeGPU {
				a.closed[v.Server] = false
			}
		}
	}
	for i, v := range t.Nodes {
		if v.Server >= 0 && v.Kind != stream.NodeGPU {
			a.switches[v.Server] = append(a.switches[v.Server], int32(i))
		}
	}

	// The nodes that may move bytes between two nodes of one server (u,
	// in stream order), and those servers.
	var u []int32
	var touch [][]int32
	index := make([]int32, n) // position in u + 1
	count := make([]int32, servers)
	ranks := 0
	for i := int32(0); int(i) < n; i++ {
		for _, d := range in.DAG.Deps(i) {
			if d >= i {
				return 0 // not in stream order: no cheap ancestor sets
			}
		}
		f := in.Flow(i)
		var s []int32
		switch f.Kind {
		case flowset.Transfer:
			if sa, sb := t.Nodes[f.Src].Server, t.Nodes[f.Dst].Server; sa >= 0 && sa == sb {
				s = []int32{sa}
			}
		case flowset.Coll:
			rec := in.Collectives[f.Coll]
			groups, _ := groupRanks(in, rec.Group) // none: the expansion's error
			for _, g := range groups {
				ranks += len(g)
			}
			if ranks > maxSymmetryRanks {
				return 0
			}
			// NVLS sends to the NVSwitch, PXN relays through another
			// GPU of the sender's server: either may move bytes inside
			// a server where the group has one rank.
			algo := strings.ToLower(rec.Algorithm)
			s = touched(t, groups, rec.PXN || strings.Contains(algo, "nvls") || strings.Contains(algo, "pxn"), count)
		}
		if len(s) > 0 {
			u = append(u, i)
			touch = append(touch, s)
			index[i] = int32(len(u))
		}
	}
	if len(u) == 0 || int64(n)*int64(len(u)) > maxSymmetryBits {
		return 0
	}

	// anc[i]: the nodes of u that node i waits on, directly or not.
	words := (len(u) + 63) / 64
	anc := make([]uint64, n*words)
	for i := 0; i < n; i++ {
		row := anc[i*words : (i+1)*words]
		for _, d := range in.DAG.Deps(int32(i)) {
			for w, x := range anc[int(d)*words : int(d+1)*words] {
				row[w] |= x
			}
			if k := index[d] - 1; k >= 0 {
				row[k/64] |= 1 << (k % 64)
			}
		}
	}
	// A server is in order when the nodes that move bytes inside it each
	// wait on the one before: no two of them can overlap there.
	last := make([]int32, servers)
	inOrder := make([]bool, servers)
	for i := range last {
		last[i], inOrder[i] = -1, true
	}
	for k, i := range u {
		for _, s := range touch[k] {
			if p := last[s]; p >= 0 && anc[int(i)*words+int(p)/64]&(1<<(p%64)) == 0 {
				inOrder[s] = false
			}
			last[s] = int32(k)
		}
	}

	marked := 0
	for k, i := range u {
		f := in.Flow(i)
		if f.Kind != flowset.Coll {
			continue
		}
		ok := true
		for _, s := range touch[k] {
			ok = ok && inOrder[s]
		}
		if ok && a.alike(in.Collectives[f.Coll].Group) {
			alone[i] = true
			marked++
		}
	}
	return marked
}

// touched lists the servers in which a collective over groups may move
// bytes between two of the server's nodes: those holding two ranks of a
// group, or, when it relays (NVLS, PXN), every server of its ranks. count
// is scratch, a zero per server, left zero.
func touched(t *stream.Topology, groups [][]int32, relays bool, count []int32) []int32 {
	var out []int32
	for _, g := range groups {
		for _, rank := range g {
			if s := server(t, rank); s >= 0 {
				count[s]++
			}
		}
		for _, rank := range g {
			s := server(t, rank)
			if s >= 0 && count[s] > 0 {
				if count[s] >= 2 || relays {
					out = append(out, s)
				}
				count[s] = 0
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// server is GPU rank's server, -1 for no GPU of t (the expansion refuses
// such a rank with an error).
func server(t *stream.Topology, rank int32) int32 {
	if rank < 0 || int(rank) >= t.GPUs {
		return -1
	}
	return t.Nodes[rank].Server
}

type symAnalysis struct {
	in       *flowset.Set
	r        *route.Router
	rules    SymmetryRules
	closed   []bool    // per server: its NVSwitches link only inside it
	switches [][]int32 // per server: its NVSwitches
	geom     map[int64]bool
	mark     []int32 // per node: group + 1 during alike
	owner    []int32 // per directed link: group + 1 during alike
	buf      []route.DirLink
}

type hopKind struct {
	bw  float64
	lat int64
}

// alike reports whether group id and its siblings are each inside one
// closed server, on links of their own that touch their GPUs, with the
// same unique route, hop by hop of the same bandwidth and latency, between
// each pair of positions (ranks in group order, then the server's
// NVSwitches) as the first group.
func (a *symAnalysis) alike(id int64) bool {
	if ok, done := a.geom[id]; done {
		return ok
	}
	groups, _ := groupRanks(a.in, id)
	ok := a.check(groups)
	a.geom[id] = ok
	return ok
}

func (a *symAnalysis) check(groups [][]int32) bool {
	t := a.in.Topology
	if len(groups) < 2 || len(groups[0]) < 2 {
		return false
	}
	m := len(groups[0])
	var first [][]hopKind // group 0's hops, by pair
	clear(a.mark)
	clear(a.owner)
	used := map[int32]bool{}
	for gi, g := range groups {
		if len(g) != m {
			return false
		}
		s := server(t, g[0])
		if s < 0 || !a.closed[s] || len(a.switches[s]) != len(a.switches[server(t, groups[0][0])]) ||
			(a.rules.WholeServers && used[s]) {
			return false
		}
		used[s] = true
		for _, rank := range g {
			if server(t, rank) != s || a.mark[rank] != 0 {
				return false
			}
			a.mark[rank] = int32(gi + 1)
		}
		nodes := append(append([]int32(nil), g...), a.switches[s]...)
		pair := 0
		for i, src := range nodes {
			for j, dst := range nodes {
				if i == j || (i >= m && j >= m) {
					continue
				}
				path, unique, err := a.r.OnlyPath(a.buf[:0], src, dst)
				a.buf = path
				if err != nil || !unique {
					return false
				}
				if gi == 0 {
					first = append(first, nil)
				} else if len(first[pair]) != len(path) {
					return false
				}
				for h, dl := range path {
					l := &t.Links[dl.Link()]
					if t.Nodes[l.A].Server != s || t.Nodes[l.B].Server != s ||
						(a.mark[l.A] != int32(gi+1) && a.mark[l.B] != int32(gi+1)) {
						return false // leaves the server, or touches no GPU of the group
					}
					if o := a.owner[dl]; (o != 0 && o != int32(gi+1)) || (a.rules.LinkOK != nil && !a.rules.LinkOK(dl)) {
						return false
					}
					a.owner[dl] = int32(gi + 1)
					k := hopKind{l.BWbps, l.LatencyPs}
					if gi == 0 {
						first[pair] = append(first[pair], k)
					} else if first[pair][h] != k {
						return false
					}
				}
				pair++
			}
		}
	}
	return true
}
