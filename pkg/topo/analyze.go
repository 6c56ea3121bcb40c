package topo

import (
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// CheckNICLinks verifies that every GPU has exactly n NIC links.
func CheckNICLinks(t *Topology, n int) error {
	count := make([]int, t.GPUs)
	for i := range t.Links {
		l := &t.Links[i]
		if l.Kind != stream.LinkNIC {
			continue
		}
		for _, v := range [2]int32{l.A, l.B} {
			if int(v) < t.GPUs {
				count[v]++
			}
		}
	}
	for g, c := range count {
		if c != n {
			return fmt.Errorf("GPU %d has %d NIC links, the family prescribes %d", g, c, n)
		}
	}
	return nil
}

// Diameter is the largest hop count of a shortest path between two GPUs,
// where only switches (NVSwitches and network switches) forward: GPUs are
// endpoints, as in a real fabric. It fails if some GPU cannot reach another.
//
// It grows, for every switch, the set of GPUs within d hops as a bitset, so
// a 15360-GPU fabric costs a few bitset ORs per link and hop.
func Diameter(t *Topology) (int, error) {
	G := t.GPUs
	if G <= 1 {
		return 0, nil
	}
	adj := BuildAdjacency(t)
	words := (G + 63) / 64
	nSw := len(t.Nodes) - G
	cur := make([]uint64, nSw*words)
	next := make([]uint64, nSw*words)
	set := func(b []uint64, sw int) []uint64 { return b[sw*words : (sw+1)*words] }
	// GPU g reaches within d+1 hops: g, its GPU neighbours, and what its
	// switch neighbours reach within d hops.
	reach := make([]uint64, words)
	allGPUs := func(d int, sw []uint64) (bool, int) {
		for g := 0; g < G; g++ {
			clear(reach)
			reach[g/64] |= 1 << (g % 64)
			for _, li := range adj.Links[adj.Start[g]:adj.Start[g+1]] {
				o := Other(t, li, int32(g))
				if int(o) < G {
					reach[o/64] |= 1 << (o % 64)
				} else if sw != nil {
					s := set(sw, int(o)-G)
					for w := range reach {
						reach[w] |= s[w]
					}
				}
			}
			n := 0
			for _, w := range reach {
				n += bits.OnesCount64(w)
			}
			if n < G {
				return false, g
			}
		}
		return true, -1
	}
	if ok, _ := allGPUs(1, nil); ok {
		return 1, nil
	}
	// d = 1: a switch reaches its GPU neighbours.
	for sw := 0; sw < nSw; sw++ {
		v := int32(sw + G)
		s := set(cur, sw)
		for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
			if o := Other(t, li, v); int(o) < G {
				s[o/64] |= 1 << (o % 64)
			}
		}
	}
	for d := 1; d <= len(t.Nodes); d++ {
		ok, bad := allGPUs(d+1, cur)
		if ok {
			return d + 1, nil
		}
		changed := false
		for sw := 0; sw < nSw; sw++ {
			v := int32(sw + G)
			dst := set(next, sw)
			copy(dst, set(cur, sw))
			for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
				o := Other(t, li, v)
				if int(o) < G {
					continue
				}
				src := set(cur, int(o)-G)
				for w := range dst {
					dst[w] |= src[w]
				}
			}
			if !changed {
				for w, x := range dst {
					if x != cur[sw*words+w] {
						changed = true
						break
					}
				}
			}
		}
		cur, next = next, cur
		if !changed {
			return 0, fmt.Errorf("GPU %d cannot reach every other GPU through the switches", bad)
		}
	}
	return 0, fmt.Errorf("diameter search did not converge")
}

// TierStat summarises one network tier for --summary.
type TierStat struct {
	Role     string
	Tier     int8
	Switches int
	DownBps  float64 // towards GPUs
	UpBps    float64 // towards higher tiers
	LevelBps float64 // to switches of the same tier (dragonfly local/global)
}

// Oversubscription is down:up, or down:level when a tier has no uplinks
// (dragonfly routers); 0 for the top tier.
func (s TierStat) Oversubscription() float64 {
	switch {
	case s.UpBps > 0:
		return s.DownBps / s.UpBps
	case s.LevelBps > 0:
		return s.DownBps / s.LevelBps
	}
	return 0
}

// Tiers reports the bandwidth of each network switch role, down and up.
func Tiers(t *Topology) []TierStat {
	byRole := map[string]*TierStat{}
	tierOf := func(v int32) int8 { return t.Nodes[v].Tier }
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Kind != stream.NodeSwitch {
			continue
		}
		s := byRole[n.Role]
		if s == nil {
			s = &TierStat{Role: n.Role, Tier: n.Tier}
			byRole[n.Role] = s
		}
		s.Switches++
	}
	for i := range t.Links {
		l := &t.Links[i]
		for _, end := range [2][2]int32{{l.A, l.B}, {l.B, l.A}} {
			v, o := end[0], end[1]
			if t.Nodes[v].Kind != stream.NodeSwitch {
				continue
			}
			s := byRole[t.Nodes[v].Role]
			switch {
			case tierOf(o) < tierOf(v):
				s.DownBps += l.BWbps
			case tierOf(o) > tierOf(v):
				s.UpBps += l.BWbps
			default:
				s.LevelBps += l.BWbps
			}
		}
	}
	out := make([]TierStat, 0, len(byRole))
	for _, s := range byRole {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tier != out[j].Tier {
			return out[i].Tier < out[j].Tier
		}
		return out[i].Role < out[j].Role
	})
	return out
}

// Bisection is the maximum flow, in bit/s, from the GPUs of the first half
// of the servers to the GPUs of the second half, over the fabric with GPUs
// as endpoints only. For the symmetric families this is the bisection
// bandwidth across the server order; for an odd number of servers the
// larger half is the second.
func Bisection(t *Topology) float64 {
	servers := t.GPUs / t.GPUsPerServer
	if servers < 2 {
		return 0
	}
	split := (servers / 2) * t.GPUsPerServer
	n := len(t.Nodes)
	src, sink := n, n+1
	f := newFlowNet(n + 2)
	inf := math.Inf(1)
	for g := 0; g < t.GPUs; g++ {
		if g < split {
			f.add(src, g, inf)
		} else {
			f.add(g, sink, inf)
		}
	}
	for i := range t.Links {
		l := &t.Links[i]
		a, b := int(l.A), int(l.B)
		// A source-side GPU only sends, a sink-side GPU only receives.
		canSend := func(v int) bool { return v >= t.GPUs || v < split }
		canRecv := func(v int) bool { return v >= t.GPUs || v >= split }
		if canSend(a) && canRecv(b) {
			f.add(a, b, l.BWbps)
		}
		if canSend(b) && canRecv(a) {
			f.add(b, a, l.BWbps)
		}
	}
	return f.maxflow(src, sink)
}

// flowNet is Dinic's max-flow on float capacities.
type flowNet struct {
	head  []int32
	next  []int32
	to    []int32
	cap   []float64
	level []int32
	iter  []int32
}

func newFlowNet(n int) *flowNet {
	f := &flowNet{head: make([]int32, n), level: make([]int32, n), iter: make([]int32, n)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

func (f *flowNet) add(u, v int, c float64) {
	f.to = append(f.to, int32(v), int32(u))
	f.cap = append(f.cap, c, 0)
	f.next = append(f.next, f.head[u], f.head[v])
	e := int32(len(f.to) - 2)
	f.head[u], f.head[v] = e, e+1
}

const flowEps = 1e-6 // bit/s; residuals below this are exhausted

func (f *flowNet) bfs(s, t int) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	q := []int32{int32(s)}
	f.level[s] = 0
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for e := f.head[u]; e >= 0; e = f.next[e] {
			if v := f.to[e]; f.cap[e] > flowEps && f.level[v] < 0 {
				f.level[v] = f.level[u] + 1
				q = append(q, v)
			}
		}
	}
	return f.level[t] >= 0
}

func (f *flowNet) dfs(u, t int32, pushed float64) float64 {
	if u == t {
		return pushed
	}
	for ; f.iter[u] >= 0; f.iter[u] = f.next[f.iter[u]] {
		e := f.iter[u]
		v := f.to[e]
		if f.cap[e] > flowEps && f.level[v] == f.level[u]+1 {
			if d := f.dfs(v, t, math.Min(pushed, f.cap[e])); d > 0 {
				f.cap[e] -= d
				f.cap[e^1] += d
				return d
			}
		}
	}
	return 0
}

func (f *flowNet) maxflow(s, t int) float64 {
	total := 0.0
	for f.bfs(s, t) {
		copy(f.iter, f.head)
		for {
			d := f.dfs(int32(s), int32(t), math.Inf(1))
			if d <= 0 {
				break
			}
			total += d
		}
	}
	return total
}
