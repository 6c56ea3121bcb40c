package expand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Rails as symmetry: an APPROXIMATION, opt-in (flowsim-analytical
// --approx-rails). On a rail-optimized two-tier fabric (Spectrum-X) GPU i
// of every server has its NIC on its segment's leaf of rail i, and every
// leaf of a segment has the same uplinks (to the same spines, of the same
// bandwidth and latency): relabelling the rails (the same permutation of
// GPU indexes in every server, and of the leaves of every segment) maps
// the fabric onto itself. A COLL node's groups that share no rail then
// share no link: a route between GPUs on rails R climbs from a leaf of R
// to a spine and down to a leaf of R, and every link it takes has a GPU
// of R or a leaf of R at one end. SimAI's 9216-GPU example runs its DP
// rings on two groups, one per TP rank, on rails 0, 2, 4, 6 and 1, 3, 5,
// 7 of the same servers, and its DP_EP rings on 32 groups, 4 per rail:
// each rail's groups are the image of rail 0's.
//
// Here the groups of a node are split into components that share rails;
// when every component is the image of the first under a relabelling of
// the rails (the same servers, rank for rank, and the rails in the same
// order of first appearance), only the first component's groups run and
// the node ends when they do; each of their flows stands for one of every
// other component's. Were routes chosen alike, the others would run as the
// first does: what is lost is their own ECMP draws on the spines (a
// component on luckier or unluckier spines would end earlier or later;
// the node ends with the first), and the load they would put on links
// other nodes share with them (a pipeline transfer on another rail's
// leaf). The trace (fabricsim.approximate), the summary line and fctstats
// say so.

// UseApproxRails runs, of every COLL node that symmetry and lockstep
// leave in full, only its groups on the first rails when the others are
// their images (see above). It fails when the fabric's rails are not
// alike (railsAlike), naming why.
func (x *Store) UseApproxRails() error {
	if why := railsAlike(x.in.Topology); why != "" {
		return fmt.Errorf("--approx-rails: the fabric's rails are not alike: %s", why)
	}
	x.arails = map[int64]railPlan{}
	return nil
}

// RailMirrored is the flows the first rails' groups stood for
// (UseApproxRails), in how many COLL nodes.
func (x *Store) RailMirrored() (nodes, flows int64) { return x.railNodes, x.railFlows }

// railPlan is a node's groups to run (their positions) and, per flow
// they make, the flows it stands for on the other rails; nil run: all.
type railPlan struct {
	run    []int32
	copies int32
}

// railsAlike reports, "" when every relabelling of the rails maps the
// topology onto itself (see above), else why not: each GPU has one NIC,
// on a leaf that serves that GPU index only; the GPUs of a server have
// the same in-server links (to the same NVSwitches, no GPU-to-GPU link);
// the leaves of a segment have the same links to the same switches, none
// to another leaf; and no link joins two switches that are not leaves
// (two tiers: every network hop has a leaf end).
func railsAlike(t *stream.Topology) string {
	if t == nil || t.GPUs < 2 {
		return "no GPUs"
	}
	if multiNIC(t) {
		return "a GPU has several NICs"
	}
	local, per := localIndexes(t)
	n := per[0]
	for _, p := range per {
		if p != n {
			return "servers of different sizes"
		}
	}
	if n < 2 {
		return "one GPU per server"
	}
	gpus := int32(t.GPUs)
	leaf := make([]int32, t.GPUs)
	for g := range leaf {
		leaf[g] = -1
	}
	rail := map[int32]int32{} // a leaf's GPU index
	inServer := make([][]string, t.GPUs)
	up := map[int32][]string{} // a leaf's links to switches
	var nic *stream.Link
	for k := range t.Links {
		l := &t.Links[k]
		ga, gb := l.A >= 0 && l.A < gpus, l.B >= 0 && l.B < gpus
		if ga && gb {
			return "a GPU-to-GPU link"
		}
		if !ga && !gb {
			continue
		}
		g, o := l.A, l.B
		if gb {
			g, o = l.B, l.A
		}
		if o < 0 || int(o) >= len(t.Nodes) {
			return fmt.Sprintf("link %d ends at no node", k)
		}
		if l.Kind == stream.LinkNIC {
			if r, ok := rail[o]; ok && r != local[g] {
				return fmt.Sprintf("switch %d serves GPU indexes %d and %d", o, r, local[g])
			}
			if nic != nil && (nic.BWbps != l.BWbps || nic.LatencyPs != l.LatencyPs) {
				return "NIC links of different bandwidths or latencies"
			}
			rail[o], leaf[g], nic = local[g], o, l
			continue
		}
		if t.Nodes[o].Server != t.Nodes[g].Server || t.Nodes[o].Server < 0 {
			return fmt.Sprintf("GPU %d has a link that is not its NIC out of its server", g)
		}
		inServer[g] = append(inServer[g], fmt.Sprint(o, l.Kind, l.BWbps, l.LatencyPs))
	}
	first := map[int32]string{} // per server, its first GPU's in-server links
	for g := range gpus {
		if leaf[g] < 0 {
			return fmt.Sprintf("GPU %d has no NIC", g)
		}
		slices.Sort(inServer[g])
		sig := strings.Join(inServer[g], ";")
		s := t.Nodes[g].Server
		if f, ok := first[s]; !ok {
			first[s] = sig
		} else if f != sig {
			return fmt.Sprintf("GPU %d's links in its server are not its server's other GPUs'", g)
		}
	}
	for k := range t.Links {
		l := &t.Links[k]
		if (l.A >= 0 && l.A < gpus) || (l.B >= 0 && l.B < gpus) {
			continue
		}
		_, la := rail[l.A]
		_, lb := rail[l.B]
		switch {
		case la && lb:
			return fmt.Sprintf("link %d joins two leaves", k)
		case la:
			up[l.A] = append(up[l.A], fmt.Sprint(l.B, l.Kind, l.BWbps, l.LatencyPs))
		case lb:
			up[l.B] = append(up[l.B], fmt.Sprint(l.A, l.Kind, l.BWbps, l.LatencyPs))
		case t.Nodes[l.A].Server < 0 || t.Nodes[l.B].Server < 0:
			return fmt.Sprintf("link %d joins two switches above the leaves (more than two tiers)", k)
		}
	}
	// The leaves of a server's GPUs serve the same servers, with the same
	// uplinks: the relabelling maps leaves onto leaves.
	served := map[int32][]int32{}
	for g := range gpus {
		if s := served[leaf[g]]; len(s) == 0 || s[len(s)-1] != t.Nodes[g].Server {
			served[leaf[g]] = append(s, t.Nodes[g].Server)
		}
	}
	sigOf := map[int32]string{}
	for a, s := range served {
		slices.Sort(s)
		slices.Sort(up[a])
		sigOf[a] = fmt.Sprint(slices.Compact(s), strings.Join(up[a], ";"))
	}
	firstLeaf := map[int32]int32{} // per server, its first GPU's leaf
	for g := range gpus {
		s := t.Nodes[g].Server
		if f, ok := firstLeaf[s]; !ok {
			firstLeaf[s] = leaf[g]
		} else if sigOf[f] != sigOf[leaf[g]] {
			return fmt.Sprintf("the leaves of server %d's GPUs serve other servers or have other uplinks", s)
		}
	}
	return ""
}

// railRun is the plan of COLL node group id's groups (see above), kept
// per group id: nil run when they are one component, or the components
// are not images of one another.
func (x *Store) railRun(id int64, groups [][]int32, algo string) railPlan {
	if p, ok := x.arails[id]; ok {
		return p
	}
	p := x.railPlanOf(groups, algo)
	x.arails[id] = p
	return p
}

func (x *Store) railPlanOf(groups [][]int32, algo string) railPlan {
	t := x.in.Topology
	if len(groups) < 2 || strings.Contains(strings.ToLower(algo), "nvls") { // NVLS sends to switches
		return railPlan{}
	}
	if x.local == nil {
		x.local, x.perServer = localIndexes(t)
	}
	// Components: groups joined by a rail they share.
	parent := make([]int, len(groups))
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	byRail := map[int32]int{}
	for gi, g := range groups {
		parent[gi] = gi
		for _, r := range g {
			if r < 0 || int(r) >= t.GPUs {
				return railPlan{}
			}
			l := x.local[r]
			if o, ok := byRail[l]; ok {
				parent[find(gi)] = find(o)
			} else {
				byRail[l] = gi
			}
		}
	}
	var comps [][]int32
	at := map[int]int{}
	for gi := range groups {
		c := find(gi)
		k, ok := at[c]
		if !ok {
			k = len(comps)
			at[c] = k
			comps = append(comps, nil)
		}
		comps[k] = append(comps[k], int32(gi))
	}
	if len(comps) < 2 {
		return railPlan{}
	}
	sig := x.railSig(groups, comps[0])
	for _, c := range comps[1:] {
		if x.railSig(groups, c) != sig {
			return railPlan{}
		}
	}
	return railPlan{run: comps[0], copies: int32(len(comps) - 1)}
}

// railSig names a component's groups up to a relabelling of the rails:
// per rank its server and its rail's order of first appearance.
func (x *Store) railSig(groups [][]int32, comp []int32) string {
	t := x.in.Topology
	ord := map[int32]int32{}
	var b strings.Builder
	for _, gi := range comp {
		b.WriteByte('|')
		for _, r := range groups[gi] {
			l := x.local[r]
			o, ok := ord[l]
			if !ok {
				o = int32(len(ord))
				ord[l] = o
			}
			fmt.Fprintf(&b, "%d.%d,", t.Nodes[r].Server, o)
		}
	}
	return b.String()
}
