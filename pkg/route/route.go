// Package route computes the path a flow takes through the fabric:
// shortest paths (in hops) with ECMP, GPUs as endpoints only (a GPU never
// forwards), same-server traffic over NVLink through the NVSwitch, and each
// flow pinned to one path by a deterministic hash of (src, dst, flow id,
// seed). Every backend routes through here, so an analytical and a packet
// run of the same input put each flow on the same links.
//
// How distances are kept small: the hop distance from switch w to GPU d is
// 1 + min over d's attachment switches s of D_s[w], where D_s is a
// switch-only BFS from s. D_s is computed lazily, once per attachment switch
// (a leaf or ToR; NVSwitches, which reach only GPUs, need none), one byte
// per switch, so a 15360-GPU fabric needs a few hundred small tables instead
// of one table per destination GPU. Candidate next hops at a switch depend
// only on (switch, d's set of network attachment switches) and are cached on
// first use under that key; whole paths without any ECMP choice (NVLink,
// rail-local) are cached per GPU pair in a small direct-mapped table.
// Paths to or from a switch (NVLS flows) take the direct link when there is
// one, else a BFS table kept per such destination.
package route

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// ErrNoPath is wrapped by the errors of a pair the fabric cannot join (its
// links, less the failed ones, reach no path): a backend with failed links
// marks such a transfer failed instead of stopping.
var ErrNoPath = errors.New("no path")

// DirLink is one direction of a full-duplex link: 2*link index + dir, dir 0
// from the link's A end to B, 1 from B to A. Each direction has the link's
// full bandwidth, and backends keep per-direction state in arrays indexed by
// DirLink.
type DirLink int32

// Link is the index into Topology.Links.
func (d DirLink) Link() int32 { return int32(d) >> 1 }

// Directed returns the direction of link li that leaves node from.
func Directed(t *topo.Topology, li int32, from int32) DirLink {
	if t.Links[li].A == from {
		return DirLink(2 * li)
	}
	return DirLink(2*li + 1)
}

// FlowHash is the ECMP hash of a flow: a splitmix64 mix of src, dst, flow id
// and seed. The packet backend reuses it so both backends pick the same
// paths for the same --seed.
func FlowHash(src, dst int32, flowID int64, seed uint64) uint64 {
	h := mix(seed ^ 0x9e3779b97f4a7c15)
	h = mix(h ^ uint64(uint32(src))<<32 ^ uint64(uint32(dst)))
	return mix(h ^ uint64(flowID))
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Pick chooses one of n equal-cost candidates at node for a flow's hash.
// Mixing the node in decorrelates successive hops, as switches hashing with
// different seeds do.
func Pick(hash uint64, node int32, n int) int {
	if n <= 1 {
		return 0
	}
	hi, _ := bits.Mul64(mix(hash^uint64(uint32(node))*0xd6e8feb86659fd93), uint64(n))
	return int(hi)
}

const unreachable = math.MaxUint8

// hop is a cached candidate: the directed link out of a switch and the node
// it leads to.
type hop struct {
	dl   DirLink
	next int32
}

// Router routes flows over one topology. It caches lazily and is not safe
// for concurrent use.
type Router struct {
	t        *topo.Topology
	adj      *topo.Adjacency
	g        int32 // GPUs are nodes 0..g-1
	leafOnly []bool
	// leafServer is, for a switch with only GPU neighbours, the server
	// they all belong to (an NVSwitch's), else -1: switchDist then knows
	// a GPU of another server is no neighbour without reading its links
	// (firstHops measures each NVSwitch of the source so, on every pair
	// an AllToAll's thrash of the first-hop cache misses: switchDist was
	// 1.9% of a 512-GPU AllToAll's single loop by cachegrind, now 1.2%).
	leafServer []int32
	gpuAtt     []int32   // per GPU: index into attSets
	attSets    [][]int32 // sorted network attachment switches of a GPU
	dsw        [][]uint8 // per switch (node-g): switch-only hop distances from it, lazily
	cand       map[uint64]uint64
	pool       []hop
	fixed      []fixedPath // direct-mapped cache of paths that involve no ECMP choice
	first      []firstHop  // direct-mapped cache of route's first hops
	// server is each GPU's server (Nodes[v].Server): route reads it per
	// path, and at 8192 GPUs the node records were a cache miss there.
	server []int32
	// lat and bw are each link's latency and bandwidth (Links[i]'s), read
	// per path as a flow starts: a 48-byte link record per hop missed the
	// cache at 8192 GPUs.
	lat    []des.Time
	bw     []float64
	toNode map[int32][]uint8
	firstD []int // route's scratch: distance to dst through each of src's links
	// Spread's scratch: the shares standing at one hop and the next
	spreadA, spreadB []mass
	hopBuf           []DirLink // route's and Spread's scratch: NextHops' answer
	firstBuf         []DirLink // Spread's scratch: the first hops
}

// fixedPath caches a path that has a single candidate at every hop (NVLink
// inside a server, rail-local NIC paths): it does not depend on the hash,
// and collectives route the same pairs over and over.
type fixedPath struct {
	src, dst int32 // src == dst marks an empty entry
	n        int32
	hops     [maxFixed]DirLink
}

const (
	maxFixed  = 6
	fixedBits = 12
)

// firstHop caches, for a pair of GPUs on other servers, the distance of
// their best first hops and those links of the source, in link order:
// finding them measures every link of the source (a GPU's NVLinks, each
// NVSwitch's links to the destination), which made a tenth of an
// 8192-GPU expanded run's profile route and re-route the same ring pairs.
type firstHop struct {
	src, dst int32 // src == dst marks an empty entry
	best, n  int32
	links    [maxFirst]int32
}

const (
	maxFirst  = 4
	firstBits = 14
)

// New indexes a topology for routing. The topology must not change
// afterwards.
func New(t *topo.Topology) (*Router, error) {
	if err := topo.Validate(t); err != nil {
		return nil, err
	}
	if len(t.Nodes) >= math.MaxInt32/2 || len(t.Links) >= math.MaxInt32/2 {
		return nil, fmt.Errorf("topology too large to route: %d nodes, %d links", len(t.Nodes), len(t.Links))
	}
	r := &Router{t: t, adj: topo.BuildAdjacency(t), g: int32(t.GPUs)}
	r.lat, r.bw = make([]des.Time, len(t.Links)), make([]float64, len(t.Links))
	for i, l := range t.Links {
		r.lat[i], r.bw[i] = des.Time(l.LatencyPs), l.BWbps
	}
	r.index()
	return r, nil
}

// Fail takes a link out of routing (a failed link): paths computed from
// now on avoid it, GPUs whose only route used it become unreachable.
// Every cache is rebuilt, so failures should be rare events.
func (r *Router) Fail(li int32) error {
	if li < 0 || int(li) >= len(r.t.Links) {
		return fmt.Errorf("link %d is not a link of the topology", li)
	}
	// The adjacency already lacks the links failed before.
	a := r.adj
	out := &topo.Adjacency{Start: make([]int32, len(a.Start)), Links: make([]int32, 0, len(a.Links))}
	for v := 0; v+1 < len(a.Start); v++ {
		for _, l := range a.Links[a.Start[v]:a.Start[v+1]] {
			if l != li {
				out.Links = append(out.Links, l)
			}
		}
		out.Start[v+1] = int32(len(out.Links))
	}
	r.adj = out
	r.index()
	return nil
}

// index derives the per-node tables from the adjacency and empties the
// path caches.
func (r *Router) index() {
	t := r.t
	r.cand, r.pool, r.fixed, r.toNode = map[uint64]uint64{}, nil, make([]fixedPath, 1<<fixedBits), nil
	r.first = make([]firstHop, 1<<firstBits)
	r.server = make([]int32, t.GPUs)
	for v := range r.server {
		r.server[v] = t.Nodes[v].Server
	}
	r.attSets = nil
	nsw := len(t.Nodes) - t.GPUs
	r.leafOnly, r.leafServer = make([]bool, nsw), make([]int32, nsw)
	r.dsw = make([][]uint8, nsw)
	for s := 0; s < nsw; s++ {
		v := int32(s + t.GPUs)
		leaf, server := true, int32(-2)
		for _, li := range r.links(v) {
			o := topo.Other(t, li, v)
			if o >= r.g {
				leaf = false
				break
			}
			if server == -2 || server == r.server[o] {
				server = r.server[o]
			} else {
				server = -1
			}
		}
		r.leafOnly[s], r.leafServer[s] = leaf, max(server, -1)
	}
	r.gpuAtt = make([]int32, t.GPUs)
	ids := map[string]int32{}
	var key strings.Builder
	var att []int32
	for d := int32(0); d < r.g; d++ {
		att = att[:0]
		for _, li := range r.links(d) {
			if o := topo.Other(t, li, d); o >= r.g && !r.leafOnly[o-r.g] {
				att = append(att, o)
			}
		}
		slices.Sort(att)
		att = slices.Compact(att)
		key.Reset()
		for _, s := range att {
			key.WriteString(strconv.Itoa(int(s)))
			key.WriteByte(',')
		}
		id, ok := ids[key.String()]
		if !ok {
			id = int32(len(r.attSets))
			ids[key.String()] = id
			r.attSets = append(r.attSets, slices.Clone(att))
		}
		r.gpuAtt[d] = id
	}
}

// DirLinks is the number of directed links (2 per link).
func (r *Router) DirLinks() int { return 2 * len(r.t.Links) }

// From is the node a directed link leaves.
func (r *Router) From(d DirLink) int32 {
	if l := &r.t.Links[d.Link()]; d&1 == 0 {
		return l.A
	} else {
		return l.B
	}
}

// To is the node a directed link enters.
func (r *Router) To(d DirLink) int32 { return r.From(d ^ 1) }

// Bandwidth of a directed link in bit/s.
func (r *Router) Bandwidth(d DirLink) float64 { return r.bw[d.Link()] }

// SetBandwidth changes link li's bandwidth (both directions) from now on:
// a degraded link. Routing does not depend on it.
func (r *Router) SetBandwidth(li int32, bps float64) { r.bw[li] = bps }

// Latency is the sum of the path's link latencies.
func (r *Router) Latency(p []DirLink) des.Time {
	var lat des.Time
	for _, d := range p {
		lat = lat.Add(r.lat[d.Link()])
	}
	return lat
}

// Bottleneck is the smallest bandwidth on the path (+Inf for an empty one).
func (r *Router) Bottleneck(p []DirLink) float64 {
	bw := math.Inf(1)
	for _, d := range p {
		bw = min(bw, r.bw[d.Link()])
	}
	return bw
}

func (r *Router) links(v int32) []int32 { return r.adj.Links[r.adj.Start[v]:r.adj.Start[v+1]] }

func (r *Router) checkNode(what string, v int32) error {
	if v < 0 || int(v) >= len(r.t.Nodes) {
		return fmt.Errorf("%s %d is not a node of the topology (GPUs are 0..%d, switches %d..%d)", what, v, r.g-1, r.g, len(r.t.Nodes)-1)
	}
	return nil
}

// Path returns the path of a flow from GPU src to GPU dst as directed
// links. hash (usually FlowHash) picks among equal-cost next hops. src ==
// dst gives an empty path. An unreachable destination is an error.
// Either end may also be a switch (NVLS flows go between a GPU and its
// NVSwitch); GPUs never forward in any case.
func (r *Router) Path(src, dst int32, hash uint64) ([]DirLink, error) {
	return r.AppendPath(nil, src, dst, hash)
}

// AppendPath is Path appending to buf, so a backend reuses one buffer.
func (r *Router) AppendPath(buf []DirLink, src, dst int32, hash uint64) ([]DirLink, error) {
	return r.AppendPathPort(buf, src, dst, hash, -1)
}

// AppendPathPort is AppendPath with the first hop fixed when the source GPU
// has several equally good NIC ports (a dual-homed NIC): port p takes the
// (p mod n)-th of them, as a bonded NIC pins a queue pair to a port; a
// negative port leaves the choice to the hash.
func (r *Router) AppendPathPort(buf []DirLink, src, dst int32, hash uint64, port int) ([]DirLink, error) {
	if err := r.checkNode("src", src); err != nil {
		return buf, err
	}
	if err := r.checkNode("dst", dst); err != nil {
		return buf, err
	}
	if src == dst {
		return buf, nil
	}
	slot := &r.fixed[uint32(mix(uint64(uint32(src))<<32|uint64(uint32(dst))))>>(32-fixedBits)]
	if slot.src == src && slot.dst == dst {
		return append(buf, slot.hops[:slot.n]...), nil
	}
	start := len(buf)
	buf, choice, err := r.route(buf, src, dst, hash, port)
	if err == nil && !choice && len(buf)-start <= maxFixed {
		slot.src, slot.dst, slot.n = src, dst, int32(len(buf)-start)
		copy(slot.hops[:], buf[start:])
	}
	return buf, err
}

// OnlyPath appends the path from src to dst when routing leaves no choice
// at any hop (it then does not depend on a flow's hash); ok is false when
// some hop has several candidates.
func (r *Router) OnlyPath(buf []DirLink, src, dst int32) (_ []DirLink, ok bool, err error) {
	if err := r.checkNode("src", src); err != nil {
		return buf, false, err
	}
	if err := r.checkNode("dst", dst); err != nil {
		return buf, false, err
	}
	if src == dst {
		return buf, true, nil
	}
	buf, choice, err := r.route(buf, src, dst, 0, -1)
	return buf, !choice && err == nil, err
}

// route computes a path; choice reports whether any hop had more than one
// candidate (then the path depends on the hash).
func (r *Router) route(buf []DirLink, src, dst int32, hash uint64, port int) (_ []DirLink, choice bool, err error) {
	if src >= r.g || dst >= r.g {
		return r.anyPath(buf, src, dst, hash)
	}
	t := r.t
	if ss := r.server[src]; ss >= 0 && ss == r.server[dst] {
		if p, n, ok := r.nvlinkPath(buf, src, dst, hash); ok {
			return p, n > 1, nil
		}
	}
	fh := &r.first[uint32(mix(uint64(uint32(src))<<32|uint64(uint32(dst))))>>(32-firstBits)]
	if fh.src != src || fh.dst != dst {
		best, nbest, err := r.firstHops(src, dst)
		if err != nil {
			return buf, false, err
		}
		fh.src, fh.dst = src, src // empty until filled
		if nbest <= maxFirst {
			n := 0
			for j, li := range r.links(src) {
				if r.firstD[j] == best {
					fh.links[n] = li
					n++
				}
			}
			fh.src, fh.dst, fh.best, fh.n = src, dst, int32(best), int32(n)
		} else {
			return r.routeFrom(buf, src, dst, hash, port, best, nbest)
		}
	}
	best, nbest := int(fh.best), int(fh.n)
	choice = nbest > 1
	k := Pick(hash, src, nbest)
	if port >= 0 {
		k = port % nbest
	}
	li := fh.links[k]
	buf = append(buf, Directed(t, li, src))
	return r.routeOn(buf, topo.Other(t, li, src), dst, hash, best, choice)
}

// routeFrom is route past the first hops' distances (r.firstD): best, of
// which nbest links reach.
func (r *Router) routeFrom(buf []DirLink, src, dst int32, hash uint64, port int, best, nbest int) (_ []DirLink, choice bool, err error) {
	t := r.t
	choice = nbest > 1
	k := Pick(hash, src, nbest)
	if port >= 0 {
		k = port % nbest
	}
	var v int32
	for j, li := range r.links(src) {
		if r.firstD[j] == best {
			if k == 0 {
				buf = append(buf, Directed(t, li, src))
				v = topo.Other(t, li, src)
				break
			}
			k--
		}
	}
	return r.routeOn(buf, v, dst, hash, best, choice)
}

// routeOn follows the path from v, best hops from GPU dst before its
// first hop, and reports whether any hop had a choice.
func (r *Router) routeOn(buf []DirLink, v, dst int32, hash uint64, best int, choice bool) (_ []DirLink, _ bool, err error) {
	t := r.t
	for dist := best - 1; v != dst; dist-- {
		c := r.NextHops(r.hopBuf[:0], v, dst, dist)
		r.hopBuf = c
		if len(c) == 0 {
			return buf, false, fmt.Errorf("internal: no next hop at node %d towards GPU %d", v, dst)
		}
		choice = choice || len(c) > 1
		d := c[Pick(hash, v, len(c))]
		buf = append(buf, d)
		v = topo.Other(t, d.Link(), v)
	}
	return buf, choice, nil
}

// firstHops fills r.firstD with the distance to GPU dst through each of
// GPU src's links (towards dst itself or a switch) and returns the best and
// how many links reach it.
func (r *Router) firstHops(src, dst int32) (best, nbest int, err error) {
	t := r.t
	att := r.attSets[r.gpuAtt[dst]]
	best = unreachable + 2
	r.firstD = r.firstD[:0]
	for _, li := range r.links(src) {
		o := topo.Other(t, li, src)
		d := unreachable + 2
		switch {
		case o == dst:
			d = 1
		case o >= r.g:
			d = 1 + r.switchDist(o, dst, att)
		}
		r.firstD = append(r.firstD, d)
		if d < best {
			best, nbest = d, 1
		} else if d == best {
			nbest++
		}
	}
	if best > unreachable {
		return 0, 0, fmt.Errorf("%w from GPU %d to GPU %d through the switches", ErrNoPath, src, dst)
	}
	return best, nbest, nil
}

// nvlinkPairs calls fn with each NVLink pair joining GPUs src and dst
// through an NVSwitch w both reach (link a from src, link b to dst), in
// link order, until fn returns false.
func (r *Router) nvlinkPairs(src, dst int32, fn func(a, b, w int32) bool) {
	t := r.t
	for _, a := range r.links(src) {
		w := topo.Other(t, a, src)
		if t.Links[a].Kind != stream.LinkNVLink || w < r.g {
			continue
		}
		for _, b := range r.links(dst) {
			if t.Links[b].Kind == stream.LinkNVLink && topo.Other(t, b, dst) == w && !fn(a, b, w) {
				return
			}
		}
	}
}

// nvlinkPath routes between GPUs of one server over NVLink: GPU, one of the
// n NVSwitch paths both GPUs connect to, GPU. ok is false when there is
// none (a server without NVSwitches), and the flow takes the network instead.
func (r *Router) nvlinkPath(buf []DirLink, src, dst int32, hash uint64) (_ []DirLink, n int, ok bool) {
	r.nvlinkPairs(src, dst, func(_, _, _ int32) bool { n++; return true })
	if n == 0 {
		return buf, 0, false
	}
	k := Pick(hash, src, n)
	r.nvlinkPairs(src, dst, func(a, b, w int32) bool {
		if k > 0 {
			k--
			return true
		}
		buf = append(buf, Directed(r.t, a, src), Directed(r.t, b, w))
		return false
	})
	return buf, n, true
}

// switchDist is the hop count from switch w to GPU dst, whose network
// attachment switches are att; unreachable when there is no path.
func (r *Router) switchDist(w, dst int32, att []int32) int {
	if r.leafOnly[w-r.g] {
		// A switch with only GPU neighbours reaches dst only directly.
		if sv := r.leafServer[w-r.g]; sv >= 0 && dst >= 0 && dst < r.g && sv != r.server[dst] {
			return unreachable
		}
		for _, li := range r.links(dst) {
			if topo.Other(r.t, li, dst) == w {
				return 1
			}
		}
		return unreachable
	}
	best := unreachable
	for _, s := range att {
		if d := int(r.distFrom(s)[w-r.g]); d < best {
			best = d
		}
	}
	if best >= unreachable-1 {
		return unreachable
	}
	return best + 1
}

// distFrom is the switch-only BFS distance table from switch s, by switch
// index (node - GPUs).
func (r *Router) distFrom(s int32) []uint8 {
	if d := r.dsw[s-r.g]; d != nil {
		return d
	}
	t := r.t
	d := make([]uint8, len(t.Nodes)-t.GPUs)
	for i := range d {
		d[i] = unreachable
	}
	d[s-r.g] = 0
	queue := []int32{s}
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		du := d[u-r.g]
		if du >= unreachable-1 {
			continue
		}
		for _, li := range r.links(u) {
			o := topo.Other(t, li, u)
			if o < r.g || d[o-r.g] != unreachable {
				continue
			}
			d[o-r.g] = du + 1
			queue = append(queue, o)
		}
	}
	r.dsw[s-r.g] = d
	return d
}

// candidates are the next hops from switch v towards any GPU with
// attachment set attID, v being dist > 1 hops away: the neighbour switches
// one hop closer, in link order.
func (r *Router) candidates(v, attID int32, dist int) []hop {
	key := uint64(uint32(v))<<32 | uint64(uint32(attID))
	if e, ok := r.cand[key]; ok {
		return r.pool[e>>32 : e>>32+e&0xffffffff]
	}
	t := r.t
	att := r.attSets[attID]
	off := len(r.pool)
	for _, li := range r.links(v) {
		o := topo.Other(t, li, v)
		if o < r.g || r.leafOnly[o-r.g] {
			continue
		}
		if r.switchDist(o, -1, att) == dist-1 {
			r.pool = append(r.pool, hop{Directed(t, li, v), o})
		}
	}
	n := len(r.pool) - off
	r.cand[key] = uint64(off)<<32 | uint64(n)
	return r.pool[off : off+n]
}

// anyPath routes when an end is a switch: over the direct links when the
// ends are neighbours (a GPU and its NVSwitch, the NVLS case), else along a
// BFS distance table towards dst, kept per such destination.
func (r *Router) anyPath(buf []DirLink, src, dst int32, hash uint64) (_ []DirLink, choice bool, err error) {
	t := r.t
	n := 0
	for _, li := range r.links(src) {
		if topo.Other(t, li, src) == dst {
			n++
		}
	}
	if n > 0 {
		k := Pick(hash, src, n)
		for _, li := range r.links(src) {
			if topo.Other(t, li, src) == dst {
				if k == 0 {
					return append(buf, Directed(t, li, src)), n > 1, nil
				}
				k--
			}
		}
	}
	dist := r.distToNode(dst)
	if dist[src] == unreachable {
		return buf, false, fmt.Errorf("%w from node %d to node %d through the switches", ErrNoPath, src, dst)
	}
	for v := src; v != dst; {
		want := dist[v] - 1
		n := 0
		for _, li := range r.links(v) {
			if o := topo.Other(t, li, v); (o == dst || o >= r.g) && dist[o] == want {
				n++
			}
		}
		choice = choice || n > 1
		k := Pick(hash, v, n)
		for _, li := range r.links(v) {
			if o := topo.Other(t, li, v); (o == dst || o >= r.g) && dist[o] == want {
				if k == 0 {
					buf = append(buf, Directed(t, li, v))
					v = o
					break
				}
				k--
			}
		}
	}
	return buf, choice, nil
}

// distToNode is the hop distance of every node to dst, where only dst and
// switches forward (a GPU source is a leaf). Computed once per destination.
func (r *Router) distToNode(dst int32) []uint8 {
	if d, ok := r.toNode[dst]; ok {
		return d
	}
	t := r.t
	d := make([]uint8, len(t.Nodes))
	for i := range d {
		d[i] = unreachable
	}
	d[dst] = 0
	queue := []int32{dst}
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		if (u < r.g && u != dst) || d[u] >= unreachable-1 {
			continue
		}
		for _, li := range r.links(u) {
			if o := topo.Other(t, li, u); d[o] == unreachable {
				d[o] = d[u] + 1
				queue = append(queue, o)
			}
		}
	}
	if r.toNode == nil {
		r.toNode = map[int32][]uint8{}
	}
	r.toNode[dst] = d
	return d
}
