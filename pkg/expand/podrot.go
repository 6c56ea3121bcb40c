package expand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Pod rotation as symmetry: an APPROXIMATION, opt-in (flowsim-analytical
// --approx-pod-rotation). On a fat-tree whose servers fill its first P
// pods alike, with every NIC of a server on one edge switch (topogen's),
// the map rot that moves GPU index l of every server to l+1 (mod G, the
// GPUs per server) and every pod p < P to p+P/G mod P (its servers, edges
// and aggregation switches, index for index; the cores and empty pods
// stay) takes the fabric onto itself, and rot^G is the identity. A COLL node whose G sibling groups
// are the images of its first under rot^0..rot^(G-1) (GPT-13B's DP rings,
// one per GPU index of the same servers) then runs its first group only,
// and every link its flows take stands for the G links of its orbit:
// each link of a flow's path is replaced by its orbit's first link
// (Canon), so that an orbit's load is the sum of what the first group's
// flows put on any of its links. That is the exact max-min solution of
// the full node when every other group's flows move as the first
// group's images: group g's flow between the images of GPUs a and b under
// rot^g takes the image of the path of the first group's flow from a to
// b (its ECMP draws are the first group's, moved by g*P/G pods). What is
// lost is each group's own draws: the groups at one edge still draw
// independently (their draws are the first group's in G different pods),
// but the collective's draws repeat every P/G pods, and the groups end
// together. It needs no ring position to be alike beyond the groups'
// rank orders being rotations of one another: under the default ECMP key
// (every chunk hashed anew) a ring's pace is set by many independent
// draws, and both runs keep them per link in the same number.

// PodRotation is rot (see above) on a topology's nodes and directed links.
type PodRotation struct {
	// Order is G: rot^Order is the identity.
	Order int
	node  []int32         // rot on nodes
	gpus  [][]int32       // rot^g on GPUs, g < Order
	canon []route.DirLink // per directed link, its orbit's first (smallest) link
}

// Canon is directed link l's orbit's first link: what a rotated flow
// crossing l loads.
func (r *PodRotation) Canon(l route.DirLink) route.DirLink { return r.canon[l] }

// NewPodRotation builds rot for t, or says why t has none: the servers
// must hold G GPUs each, numbered server by server, and fill P pods (P a
// multiple of G), and rot must take every link to a link of the same
// kind, bandwidth and latency.
//
// The pod of a switch is its node's group; the pods with GPUs are their
// GPUs' groups (all of them when GPUs have none).
func NewPodRotation(t *stream.Topology) (*PodRotation, error) {
	if t == nil || t.GPUs < 2 {
		return nil, fmt.Errorf("no GPUs")
	}
	g := t.GPUsPerServer
	if g < 2 || t.GPUs%g != 0 {
		return nil, fmt.Errorf("%d GPUs per server: need 2 or more, dividing the %d GPUs", g, t.GPUs)
	}
	servers := t.GPUs / g
	// The pods the GPUs fill (their nodes' group; else every pod): they
	// rotate among themselves, and the others, empty, stay.
	gpuPods, switchPods := 0, 0
	for i, n := range t.Nodes {
		switch {
		case n.Group < 0:
		case i < t.GPUs:
			gpuPods = max(gpuPods, int(n.Group)+1)
		case n.Kind == stream.NodeSwitch:
			switchPods = max(switchPods, int(n.Group)+1)
		}
	}
	pods, podded := gpuPods, gpuPods > 0
	if !podded {
		pods = switchPods
	}
	if pods < g || pods%g != 0 || servers%pods != 0 {
		return nil, fmt.Errorf("%d pods with GPUs for %d servers of %d GPUs: the pods must be a multiple of the GPUs per server, each holding the same number of servers", pods, servers, g)
	}
	perPod := servers / pods
	shift := pods / g
	for r := 0; r < t.GPUs; r++ {
		n := t.Nodes[r]
		if n.Kind != stream.NodeGPU || int(n.Server) != r/g || (podded && int(n.Group) != r/g/perPod) {
			return nil, fmt.Errorf("GPU %d: not server %d's (%d GPUs each, %d servers per pod, in order)", r, r/g, g, perPod)
		}
	}
	rot := &PodRotation{Order: g, node: make([]int32, len(t.Nodes))}
	// Switches and NVSwitches by (role, pod or server, index among those).
	type class struct {
		role string
		at   int32
	}
	members := map[class][]int32{}
	for i := t.GPUs; i < len(t.Nodes); i++ {
		n := t.Nodes[i]
		c := class{n.Role, -1}
		switch {
		case n.Kind == stream.NodeNVSwitch:
			c.at = n.Server
		case n.Group >= 0:
			c.at = n.Group
		}
		members[c] = append(members[c], int32(i))
	}
	for c, list := range members {
		img := c
		switch {
		case c.at < 0:
		case t.Nodes[list[0]].Kind == stream.NodeNVSwitch:
			img.at = int32((int(c.at) + shift*perPod) % servers)
		case int(c.at) < pods:
			img.at = int32((int(c.at) + shift) % pods)
		}
		to := members[img]
		if len(to) != len(list) {
			return nil, fmt.Errorf("%s switches: %d at %d, %d at %d", c.role, len(list), c.at, len(to), img.at)
		}
		for k, n := range list {
			rot.node[n] = to[k]
		}
	}
	for r := 0; r < t.GPUs; r++ {
		s, l := r/g, r%g
		rot.node[r] = int32(((s+shift*perPod)%servers)*g + (l+1)%g)
	}
	// Links: rot must take each to one of the same kind, bandwidth and
	// latency (parallel links in order).
	type pair struct{ a, b int32 }
	key := func(a, b int32) pair {
		if a > b {
			a, b = b, a
		}
		return pair{a, b}
	}
	byPair := map[pair][]int32{}
	for li, l := range t.Links {
		k := key(l.A, l.B)
		byPair[k] = append(byPair[k], int32(li))
	}
	dir := make([]route.DirLink, 2*len(t.Links))
	for k, list := range byPair {
		img := byPair[key(rot.node[k.a], rot.node[k.b])]
		if len(img) != len(list) {
			return nil, fmt.Errorf("link %d (nodes %d-%d) has no image under the rotation", list[0], k.a, k.b)
		}
		for j, li := range list {
			l, m := t.Links[li], t.Links[img[j]]
			if l.BWbps != m.BWbps || l.LatencyPs != m.LatencyPs || l.Kind != m.Kind {
				return nil, fmt.Errorf("link %d (nodes %d-%d) and its image, link %d, differ in kind, bandwidth or latency", li, l.A, l.B, img[j])
			}
			// Direction 0 runs from A to B: its image leaves rot(A).
			d0, d1 := route.DirLink(2*img[j]), route.DirLink(2*img[j]+1)
			if m.A != rot.node[l.A] {
				d0, d1 = d1, d0
			}
			dir[2*li], dir[2*li+1] = d0, d1
		}
	}
	// rot^G must be the identity, and rot's orbits on links of size G.
	rot.canon = make([]route.DirLink, len(dir))
	for d := range dir {
		c, x := route.DirLink(d), route.DirLink(d)
		for range g {
			x = dir[x]
			c = min(c, x)
		}
		if x != route.DirLink(d) {
			return nil, fmt.Errorf("the rotation does not come back to link %d after %d steps", d/2, g)
		}
		rot.canon[d] = c
	}
	rot.gpus = make([][]int32, g)
	rot.gpus[0] = make([]int32, t.GPUs)
	for r := range rot.gpus[0] {
		rot.gpus[0][r] = int32(r)
	}
	for p := 1; p < g; p++ {
		rot.gpus[p] = make([]int32, t.GPUs)
		for r, x := range rot.gpus[p-1] {
			rot.gpus[p][r] = rot.node[x]
		}
	}
	return rot, nil
}

// imagesOf reports whether groups are groups[0]'s images under rot^0 ..
// rot^(Order-1), one each, each group's rank order a rotation of the
// image of the first's.
func (r *PodRotation) imagesOf(groups [][]int32, gpus int) bool {
	if len(groups) != r.Order {
		return false
	}
	g0 := groups[0]
	for _, x := range g0 {
		if x < 0 || int(x) >= gpus {
			return false
		}
	}
	used := make([]bool, r.Order)
	for _, g := range groups {
		if len(g) != len(g0) || len(g) == 0 {
			return false
		}
		p := 0
		for p < r.Order && (used[p] || !rotatedImage(g0, g, r.gpus[p])) {
			p++
		}
		if p == r.Order {
			return false
		}
		used[p] = true
	}
	return true
}

// rotatedImage reports whether group g, rank by rank, is the image under
// img of g0 taken from some rank on (a rotation of g0's order).
func rotatedImage(g0, g, img []int32) bool {
	at := slices.IndexFunc(g0, func(x int32) bool { return img[x] == g[0] })
	if at < 0 {
		return false
	}
	for q := range g {
		if img[g0[(at+q)%len(g0)]] != g[q] {
			return false
		}
	}
	return true
}

// UseApproxPodRotation runs, of every COLL node that symmetry leaves in
// full, only its first group when the others are its images under rot
// (see above); the backend maps that group's flows' links by rot.Canon
// (Rotated).
func (x *Store) UseApproxPodRotation(rot *PodRotation) {
	x.arot, x.rotPlans = rot, map[int64]bool{}
}

// Rotated reports whether expanded flow i's group stands for its images
// under the pod rotation (UseApproxPodRotation).
func (x *Store) Rotated(i int32) bool {
	return x.arot != nil && x.sets[x.flow(i).set].rot
}

// PodRotated is the COLL nodes of which only the first group ran
// (UseApproxPodRotation), and the flows of the others it stood for.
func (x *Store) PodRotated() (nodes, flows int64) { return x.rotNodes, x.rotFlows }

// rotRun reports whether COLL node group id's groups are images of its
// first under the rotation, kept per group id.
func (x *Store) rotRun(id int64, groups [][]int32, algo string) bool {
	if ok, seen := x.rotPlans[id]; seen {
		return ok
	}
	// NVLS sends to switches, which the images would share.
	ok := !strings.Contains(strings.ToLower(algo), "nvls") && x.arot.imagesOf(groups, x.in.Topology.GPUs)
	x.rotPlans[id] = ok
	return ok
}
