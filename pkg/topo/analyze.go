package topo

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
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

// DiameterMemory bounds the bitsets Diameter grows (two of them, one bit
// per attachment class and network switch); beyond it Diameter refuses
// rather than run the machine out of memory. Every family topogen builds
// within its limits (MaxGPUs, MaxSwitches) needs far less.
const DiameterMemory = 256 << 20

// Diameter is the largest hop count of a shortest path between two GPUs,
// where only switches (NVSwitches and network switches) forward: GPUs are
// endpoints, as in a real fabric. It fails if some GPU cannot reach another.
//
// GPUs attached to the same set of network switches are equivalent beyond
// their own server, so it grows, for every network switch, the set of such
// attachment classes within d hops as a bitset: a rail-optimized fabric has
// one class per leaf, so 131,072 GPUs cost a few thousand bits per switch.
// A switch whose links all end at GPUs of one server (an NVSwitch) only
// shortcuts pairs inside that server; a class pair whose every GPU pair is
// such a shortcut (or a direct GPU link) is at most 2 hops apart.
func Diameter(t *Topology) (int, error) {
	G := t.GPUs
	if G <= 1 {
		return 0, nil
	}
	per := t.GPUsPerServer
	if per <= 0 {
		per = G
	}
	adj := BuildAdjacency(t)
	n := len(t.Nodes)
	neighbours := func(v int) []int32 { return adj.Links[adj.Start[v]:adj.Start[v+1]] }
	// Network switches get dense indexes; local ones (links only to the
	// GPUs of one server) stay -1.
	netIdx := make([]int32, n)
	nsw := 0
	for v := 0; v < n; v++ {
		netIdx[v] = -1
		if v < G {
			continue
		}
		server, local := -1, true
		for _, li := range neighbours(v) {
			o := int(Other(t, li, int32(v)))
			if o >= G || (server >= 0 && o/per != server) {
				local = false
				break
			}
			server = o / per
		}
		if !local {
			netIdx[v] = int32(nsw)
			nsw++
		}
	}
	// Attachment classes: GPUs with the same network switches.
	classOf := make([]int32, G)
	var classKey [][]int32 // network switch indexes
	var classSize []int
	var classGPU []int // one member, for messages
	byKey := map[string]int32{}
	var key []int32
	var kb []byte
	for g := 0; g < G; g++ {
		key = key[:0]
		for _, li := range neighbours(g) {
			if s := netIdx[Other(t, li, int32(g))]; s >= 0 {
				key = append(key, s)
			}
		}
		slices.Sort(key)
		key = slices.Compact(key)
		kb = kb[:0]
		for _, s := range key {
			kb = binary.LittleEndian.AppendUint32(kb, uint32(s))
		}
		c, ok := byKey[string(kb)]
		if !ok {
			c = int32(len(classKey))
			byKey[string(kb)] = c
			classKey = append(classKey, slices.Clone(key))
			classSize = append(classSize, 0)
			classGPU = append(classGPU, g)
		}
		classOf[g] = c
		classSize[c]++
	}
	C := len(classKey)
	words := (C + 63) / 64
	if need := 2 * int64(nsw) * int64(words) * 8; need > DiameterMemory {
		return 0, fmt.Errorf("diameter: %d GPU attachment classes over %d network switches would take %d MiB, more than %d MiB",
			C, nsw, need>>20, DiameterMemory>>20)
	}
	// Shortcut pairs: a direct GPU link (1 hop) or a shared local switch
	// (2 hops), counted per class pair.
	shortcuts := map[[2]int32]int{}
	stamp := make([]int32, G)
	for i := range stamp {
		stamp[i] = -1
	}
	adjacentPairs := 0
	for g := 0; g < G; g++ {
		mark := func(o int32, direct bool) {
			if int(o) <= g || stamp[o] == int32(g) {
				return
			}
			stamp[o] = int32(g)
			if direct {
				adjacentPairs++
			}
			a, b := classOf[g], classOf[o]
			if a > b {
				a, b = b, a
			}
			shortcuts[[2]int32{a, b}]++
		}
		for _, li := range neighbours(g) { // direct links first, counted as such
			if o := Other(t, li, int32(g)); int(o) < G {
				mark(o, true)
			}
		}
		for _, li := range neighbours(g) {
			v := Other(t, li, int32(g))
			if int(v) < G || netIdx[v] >= 0 {
				continue
			}
			for _, lj := range neighbours(int(v)) {
				mark(Other(t, lj, v), false)
			}
		}
	}
	if adjacentPairs == G*(G-1)/2 {
		return 1, nil
	}
	// Class pairs every GPU pair of which is a shortcut need no switch path.
	excused := make([][]int32, C)
	for c := range C {
		if classSize[c] == 1 { // no pair inside
			excused[c] = append(excused[c], int32(c))
		}
	}
	for cp, k := range shortcuts {
		a, b := cp[0], cp[1]
		pairs := classSize[a] * classSize[b]
		if a == b {
			pairs = classSize[a] * (classSize[a] - 1) / 2
		}
		if k == pairs {
			excused[a] = append(excused[a], b)
			if a != b {
				excused[b] = append(excused[b], a)
			}
		}
	}
	// cur[s]: the classes attached to a network switch within d hops of s.
	cur := make([]uint64, nsw*words)
	next := make([]uint64, nsw*words)
	set := func(b []uint64, s int32) []uint64 { return b[int(s)*words : (int(s)+1)*words] }
	for c, k := range classKey {
		for _, s := range k {
			set(cur, s)[c/64] |= 1 << (c % 64)
		}
	}
	reach := make([]uint64, words)
	covered := func() (bool, int) {
		for c := range C {
			clear(reach)
			for _, s := range classKey[c] {
				for w, x := range set(cur, s) {
					reach[w] |= x
				}
			}
			k := 0
			for _, w := range reach {
				k += bits.OnesCount64(w)
			}
			for _, o := range excused[c] {
				if reach[o/64]&(1<<(o%64)) == 0 {
					k++
				}
			}
			if k < C {
				return false, classGPU[c]
			}
		}
		return true, -1
	}
	for d := 0; d <= nsw; d++ {
		ok, bad := covered()
		if ok {
			return d + 2, nil
		}
		changed := false
		for v := G; v < n; v++ {
			s := netIdx[v]
			if s < 0 {
				continue
			}
			dst := set(next, s)
			copy(dst, set(cur, s))
			for _, li := range neighbours(v) {
				if o := netIdx[Other(t, li, int32(v))]; o >= 0 {
					for w, x := range set(cur, o) {
						dst[w] |= x
					}
				}
			}
			if !changed && !slices.Equal(dst, set(cur, s)) {
				changed = true
			}
		}
		cur, next = next, cur
		if !changed {
			return 0, fmt.Errorf("GPU %d cannot reach every other GPU through the switches", bad)
		}
	}
	return 0, fmt.Errorf("diameter search did not converge")
}

// TierStat summarises one network tier for --summary. Only its populated
// switches, those with a GPU below them (reached going down the tiers),
// carry traffic towards GPUs: the bandwidths and per-switch link counts are
// theirs, and their down links count only when they lead to a GPU or a
// populated switch. An edge switch no GPU hangs off, and the aggregation
// switches above only such edges, would otherwise pull the averages down
// (a k=16 fat-tree with 128 GPUs read 0.125:1 at its edge, where the 16
// edges that hold GPUs are 1:1).
type TierStat struct {
	Role      string
	Tier      int8
	Switches  int     // all switches of the role
	Populated int     // those with GPUs below them
	DownBps   float64 // towards GPUs
	UpBps     float64 // towards higher tiers
	LevelBps  float64 // to switches of the same tier (dragonfly local/global)
	// Links per populated switch, the fewest and the most: GPU NICs (links
	// to GPUs), down (to GPUs and populated lower switches), up and level.
	GPUNICs, Down, Up, Level [2]int
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

// Tiers reports the bandwidth of each network switch role, down and up,
// over its populated switches (see TierStat).
func Tiers(t *Topology) []TierStat {
	adj := BuildAdjacency(t)
	tierOf := func(v int32) int8 { return t.Nodes[v].Tier }
	// populated[v]: a GPU lies below v. Lower tiers first, so that a
	// switch's lower neighbours are settled before it.
	order := make([]int32, 0, len(t.Nodes)-t.GPUs)
	for v := t.GPUs; v < len(t.Nodes); v++ {
		order = append(order, int32(v))
	}
	sort.SliceStable(order, func(i, j int) bool { return tierOf(order[i]) < tierOf(order[j]) })
	populated := make([]bool, len(t.Nodes))
	for v := 0; v < t.GPUs; v++ {
		populated[v] = true
	}
	for _, v := range order {
		for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
			if o := Other(t, li, v); tierOf(o) < tierOf(v) && populated[o] {
				populated[v] = true
				break
			}
		}
	}
	byRole := map[string]*TierStat{}
	span := func(r *[2]int, n int, first bool) {
		if first || n < r[0] {
			r[0] = n
		}
		if first || n > r[1] {
			r[1] = n
		}
	}
	for _, v := range order {
		n := &t.Nodes[v]
		if n.Kind != stream.NodeSwitch {
			continue
		}
		s := byRole[n.Role]
		if s == nil {
			s = &TierStat{Role: n.Role, Tier: n.Tier}
			byRole[n.Role] = s
		}
		s.Switches++
		if !populated[v] {
			continue
		}
		var gpus, down, up, level int
		for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
			o, bw := Other(t, li, v), t.Links[li].BWbps
			switch {
			case tierOf(o) < tierOf(v):
				if !populated[o] {
					continue // towards no GPU
				}
				if int(o) < t.GPUs {
					gpus++
				}
				down++
				s.DownBps += bw
			case tierOf(o) > tierOf(v):
				up++
				s.UpBps += bw
			default:
				level++
				s.LevelBps += bw
			}
		}
		first := s.Populated == 0
		s.Populated++
		span(&s.GPUNICs, gpus, first)
		span(&s.Down, down, first)
		span(&s.Up, up, first)
		span(&s.Level, level, first)
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
