package collective

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Placement policies (simccl-decompose --place).
const (
	PlacePacked      = "packed"
	PlaceSpread      = "spread"
	PlaceRailAligned = "rail-aligned"
	PlaceRandom      = "random"
)

// Placement is where a job's ranks go: a policy, or GPUs listed by hand
// (GPUs, in job-rank order).
type Placement struct {
	Policy string
	GPUs   []int32
}

// ParsePlacement reads --place: packed, spread, rail-aligned, random, or
// a Slurm-style GPU list such as 0-127,256-383 (ranks in the list's
// order).
func ParsePlacement(s string) (Placement, error) {
	switch s = strings.TrimSpace(s); s {
	case PlacePacked, PlaceSpread, PlaceRailAligned, PlaceRandom:
		return Placement{Policy: s}, nil
	case "":
		return Placement{}, fmt.Errorf("empty: give a policy (packed, spread, rail-aligned, random) or GPUs such as 0-127,256-383")
	}
	var gpus []int32
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseInt(lo, 10, 32)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseInt(hi, 10, 32)
		}
		if err != nil || a < 0 || b < a {
			return Placement{}, fmt.Errorf("%q is neither a policy (packed, spread, rail-aligned, random) nor a GPU list such as 0-127,256-383 (at %q)", s, part)
		}
		if b-a+int64(len(gpus)) > 1<<24 {
			return Placement{}, fmt.Errorf("%q lists more than %d GPUs", s, 1<<24)
		}
		for g := a; g <= b; g++ {
			gpus = append(gpus, int32(g))
		}
	}
	return Placement{GPUs: gpus}, nil
}

// Resolve gives the GPU of each of world ranks on topology t: the list as
// it is, or the policy's choice (seed drives random). Policies place
// whole servers, each server's ranks on its GPUs in local order, so a
// rank keeps its rail; only the last server may be partly used.
func (p Placement) Resolve(t *stream.Topology, world int, seed uint64) ([]int32, error) {
	if p.Policy == "" {
		return p.GPUs, nil
	}
	if world > t.GPUs {
		return nil, fmt.Errorf("the job's %d ranks do not fit the topology's %d GPUs", world, t.GPUs)
	}
	per := t.GPUsPerServer
	servers := t.GPUs / per
	need := (world + per - 1) / per
	var order []int
	switch p.Policy {
	case PlacePacked:
		order = seq(servers)
	case PlaceRandom:
		order = seq(servers)
		r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	case PlaceSpread:
		order = spreadOrder(leavesOf(t))
	case PlaceRailAligned:
		order = railAlignedOrder(leavesOf(t), need)
	default:
		return nil, fmt.Errorf("unknown policy %q", p.Policy)
	}
	out := make([]int32, 0, world)
	for _, s := range order[:need] {
		for l := 0; l < per && len(out) < world; l++ {
			out = append(out, int32(s*per+l))
		}
	}
	return out, nil
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// leaf is a first-tier switch and the servers whose lowest NIC'd GPU it
// serves, in server order; pod is its node's group (-1: none).
type leaf struct {
	id, pod int32
	servers []int
}

// leavesOf groups the servers by the switch their first GPU with a NIC
// link reaches (the edge, leaf or ToR switch; on rail-optimized fabrics
// rail 0's leaf), leaves in node-id order. Servers without a NIC link
// share a leaf of id -1.
func leavesOf(t *stream.Topology) []leaf {
	per := t.GPUsPerServer
	servers := t.GPUs / per
	first := make([]int32, servers) // lowest GPU with a NIC link, its switch
	gpu := make([]int32, servers)
	for s := range first {
		first[s], gpu[s] = -1, int32(1<<30)
	}
	for i := range t.Links {
		l := &t.Links[i]
		if l.Kind != stream.LinkNIC {
			continue
		}
		g, sw := l.A, l.B
		if g >= int32(t.GPUs) {
			g, sw = sw, g
		}
		if g < 0 || g >= int32(t.GPUs) || sw < int32(t.GPUs) {
			continue
		}
		s := int(g) / per
		if g < gpu[s] || g == gpu[s] && sw < first[s] {
			gpu[s], first[s] = g, sw
		}
	}
	byID := map[int32]int{}
	var out []leaf
	for s, sw := range first {
		i, ok := byID[sw]
		if !ok {
			pod := int32(-1)
			if sw >= 0 && int(sw) < len(t.Nodes) {
				pod = t.Nodes[sw].Group
			}
			i = len(out)
			byID[sw] = i
			out = append(out, leaf{id: sw, pod: pod})
		}
		out[i].servers = append(out[i].servers, s)
	}
	slices.SortStableFunc(out, func(a, b leaf) int { return int(a.id - b.id) })
	return out
}

// spreadOrder orders the servers so that consecutive ones are under
// different leaves and, where the fabric has several, in different pods:
// the leaves are interleaved across pods (pod 0's first, pod 1's first,
// ..., pod 0's second, ...), and the servers taken one per leaf in turn.
func spreadOrder(leaves []leaf) []int {
	var pods []int32
	byPod := map[int32][]int{}
	for i, l := range leaves {
		if _, ok := byPod[l.pod]; !ok {
			pods = append(pods, l.pod)
		}
		byPod[l.pod] = append(byPod[l.pod], i)
	}
	var ring []int // leaf indices
	for k := 0; len(ring) < len(leaves); k++ {
		for _, p := range pods {
			if k < len(byPod[p]) {
				ring = append(ring, byPod[p][k])
			}
		}
	}
	var order []int
	for k := 0; ; k++ {
		added := false
		for _, li := range ring {
			if k < len(leaves[li].servers) {
				order = append(order, leaves[li].servers[k])
				added = true
			}
		}
		if !added {
			return order
		}
	}
}

// railAlignedOrder fills whole leaves: the job takes the fewest leaves
// that hold its need servers (the fullest leaves first, ties in leaf
// order), so that its traffic between servers stays on the leaves' rails
// as far as it can; on a fabric of equal leaves this is packed.
func railAlignedOrder(leaves []leaf, need int) []int {
	idx := seq(len(leaves))
	slices.SortStableFunc(idx, func(a, b int) int { return len(leaves[b].servers) - len(leaves[a].servers) })
	var order []int
	for _, i := range idx {
		order = append(order, leaves[i].servers...)
	}
	// The leaves chosen, then in server order among them, so that a job
	// that fits one leaf group is contiguous.
	slices.Sort(order[:need])
	return order
}

// KeepTP checks that no tensor-parallel group of l spans servers of f.
func KeepTP(l Layout, f Fabric) error {
	groups, err := l.Groups(TP)
	if err != nil {
		return err
	}
	for i, g := range groups {
		for _, r := range g[1:] {
			if f.server(r) != f.server(g[0]) {
				return fmt.Errorf("TP group %d (ranks %d-%d) spans servers %d and %d (GPUs %d and %d)",
					i, l.Rank(g[0]), l.Rank(g[0])+len(g)-1, f.server(g[0]), f.server(r), g[0], r)
			}
		}
	}
	return nil
}
