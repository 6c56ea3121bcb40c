package route

import (
	"fmt"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// mass is the share of a transfer standing at a node while it is spread
// (dist hops from the destination, for Spreader).
type mass struct {
	node, dist int32
	m          float64
}

// Spread adds to add the bytes each directed link carries when a transfer
// of bytes from src to dst is split evenly over the equal-cost choices at
// every hop, as Path picks among them: the load that many hashed flows
// (ECMP) put on each link on average. A model that prices a whole
// collective needs that, not one flow's path. Either end may be a switch,
// as for Path.
func (r *Router) Spread(src, dst int32, bytes float64, add func(DirLink, float64)) error {
	return r.SpreadPort(src, dst, -1, bytes, add)
}

// SpreadPort is Spread with the first hop fixed as AppendPathPort fixes it
// when port is not negative: a bonded NIC's queue pair stays on its port
// while the switches beyond split it.
func (r *Router) SpreadPort(src, dst int32, port int, bytes float64, add func(DirLink, float64)) error {
	return r.SpreadLeast(src, dst, port, bytes, nil, add)
}

// SpreadLeast is SpreadPort over the least loaded candidates only: at
// every hop the share standing at a node is split evenly over the
// equal-cost next hops whose load is the least (within a part in 10^9),
// as adaptive routing steers away from loaded egresses while spreading
// over the equally idle ones. A nil load is SpreadPort.
func (r *Router) SpreadLeast(src, dst int32, port int, bytes float64, load func(DirLink) float64, add func(DirLink, float64)) error {
	if err := r.checkEnds(src, dst); err != nil {
		return err
	}
	if src == dst || bytes == 0 {
		return nil
	}
	if src >= r.g || dst >= r.g {
		return r.spreadAny(src, dst, bytes, add)
	}
	t := r.t
	if ss := t.Nodes[src].Server; ss >= 0 && ss == t.Nodes[dst].Server && r.spreadNVLink(src, dst, bytes, add) {
		return nil
	}
	best, nbest, err := r.firstHops(src, dst)
	if err != nil {
		return err
	}
	// front and next reuse the router's scratch: spreading a stage's
	// thousands of pairs would otherwise allocate per hop.
	front, next := r.spreadA[:0], r.spreadB[:0]
	defer func() { r.spreadA, r.spreadB = front[:0], next[:0] }()
	first := r.firstBuf[:0]
	for j, li := range r.links(src) {
		if r.firstD[j] == best {
			first = append(first, Directed(t, li, src))
		}
	}
	r.firstBuf = first
	if port >= 0 && nbest > 1 {
		first = first[port%nbest : port%nbest+1]
	} else {
		first = least(first, load)
	}
	share := bytes / float64(len(first))
	for _, d := range first {
		add(d, share)
		front = append(front, mass{node: topo.Other(t, d.Link(), src), m: share})
	}
	for dist := best - 1; dist >= 1; dist-- {
		next = next[:0]
		for _, fm := range front {
			v := fm.node
			c := r.NextHops(r.hopBuf[:0], v, dst, dist)
			r.hopBuf = c
			if len(c) == 0 {
				return fmt.Errorf("internal: no next hop at node %d towards GPU %d", v, dst)
			}
			c = least(c, load)
			s := fm.m / float64(len(c))
			for _, d := range c {
				add(d, s)
				if dist > 1 {
					next = append(next, mass{node: topo.Other(t, d.Link(), v), m: s})
				}
			}
		}
		front, next = merge(next), front
	}
	return nil
}

// checkEnds checks a transfer's ends are nodes of the topology.
func (r *Router) checkEnds(src, dst int32) error {
	if err := r.checkNode("src", src); err != nil {
		return err
	}
	return r.checkNode("dst", dst)
}

// least keeps, in place, the candidates of least load (all with no load).
func least(c []DirLink, load func(DirLink) float64) []DirLink {
	if load == nil || len(c) < 2 {
		return c
	}
	lo := load(c[0])
	for _, d := range c[1:] {
		lo = min(lo, load(d))
	}
	out := c[:0]
	for _, d := range c {
		if load(d) <= lo*(1+1e-9) {
			out = append(out, d)
		}
	}
	return out
}

// merge sums the shares standing at the same node, so that a fabric's
// many equal-cost paths cost one visit per switch and level.
func merge(ms []mass) []mass {
	slices.SortFunc(ms, func(a, b mass) int { return int(a.node) - int(b.node) })
	out := ms[:0]
	for _, x := range ms {
		if n := len(out); n > 0 && out[n-1].node == x.node {
			out[n-1].m += x.m
			continue
		}
		out = append(out, x)
	}
	return out
}

// spreadNVLink splits a same-server transfer over the NVSwitch paths both
// GPUs reach; false when there is none (the transfer takes the network).
func (r *Router) spreadNVLink(src, dst int32, bytes float64, add func(DirLink, float64)) bool {
	n := 0
	r.nvlinkPairs(src, dst, func(_, _, _ int32) bool { n++; return true })
	r.nvlinkPairs(src, dst, func(a, b, w int32) bool {
		add(Directed(r.t, a, src), bytes/float64(n))
		add(Directed(r.t, b, w), bytes/float64(n))
		return true
	})
	return n > 0
}

// spreadAny is Spread when an end is a switch: the direct links when the
// ends are neighbours, else every shortest path towards dst.
func (r *Router) spreadAny(src, dst int32, bytes float64, add func(DirLink, float64)) error {
	t := r.t
	var direct []int32
	for _, li := range r.links(src) {
		if topo.Other(t, li, src) == dst {
			direct = append(direct, li)
		}
	}
	for _, li := range direct {
		add(Directed(t, li, src), bytes/float64(len(direct)))
	}
	if len(direct) > 0 {
		return nil
	}
	dist := r.distToNode(dst)
	if dist[src] == unreachable {
		return fmt.Errorf("%w from node %d to node %d through the switches", ErrNoPath, src, dst)
	}
	front := []mass{{node: src, m: bytes}}
	for len(front) > 0 {
		var next []mass
		for _, fm := range front {
			v := fm.node
			if v == dst {
				continue
			}
			want := dist[v] - 1
			var hops []int32
			for _, li := range r.links(v) {
				if o := topo.Other(t, li, v); (o == dst || o >= r.g) && dist[o] == want {
					hops = append(hops, li)
				}
			}
			s := fm.m / float64(len(hops))
			for _, li := range hops {
				add(Directed(t, li, v), s)
				next = append(next, mass{node: topo.Other(t, li, v), m: s})
			}
		}
		front = merge(next)
	}
	return nil
}

// NextHops appends to buf the links a packet standing at switch v may take
// next towards GPU dst with dist links still to go: every one on a
// shortest path, the choices Path picks among by hash. A forwarding policy
// that decides per packet (spraying, flowlets, adaptive routing) chooses
// among them. Failed links are not offered. dst must be a GPU.
func (r *Router) NextHops(buf []DirLink, v, dst int32, dist int) []DirLink {
	t := r.t
	if dist == 1 {
		for _, li := range r.links(dst) {
			if topo.Other(t, li, dst) == v {
				buf = append(buf, Directed(t, li, v))
			}
		}
		return buf
	}
	for _, h := range r.candidates(v, r.gpuAtt[dst], dist) {
		buf = append(buf, h.dl)
	}
	return buf
}

// A Spreader sums Spread over many transfers. Spread is linear and the
// split at a switch more than one hop from the destination depends only
// on the destination's attachment switches, so the shares of every
// transfer towards GPUs attached alike that stand at one switch are split
// once, together, in Flush: on a 512-GPU AllToAll (64 spines) that is one
// fan-out a source leaf and destination leaf instead of one a transfer.
// The sums are Spread's but for the order of additions.
type Spreader struct {
	r *Router
	// wait holds, per attachment set, the shares waiting at switches
	// two or more hops from the destination.
	wait [][]mass
	// per-level scratch
	front, next []mass
}

// NewSpreader returns an empty Spreader on r.
func (r *Router) NewSpreader() *Spreader {
	return &Spreader{r: r, wait: make([][]mass, len(r.attSets))}
}

// Add spreads a transfer of bytes from src to dst as Spread does: the
// loads it can place now (the first and last hops) go to add at once, the
// rest to add in Flush. Transfers that Spread splits otherwise (a switch
// at either end, NVLink inside a server, a destination with several
// attachment switches) are spread whole, at once.
func (s *Spreader) Add(src, dst int32, bytes float64, add func(DirLink, float64)) error {
	r := s.r
	if err := r.checkEnds(src, dst); err != nil {
		return err
	}
	if src == dst || bytes == 0 {
		return nil
	}
	if src >= r.g || dst >= r.g || len(r.attSets[r.gpuAtt[dst]]) != 1 || r.server[src] >= 0 && r.server[src] == r.server[dst] {
		return r.Spread(src, dst, bytes, add)
	}
	t := r.t
	best, nbest, err := r.firstHops(src, dst)
	if err != nil {
		return err
	}
	att := r.gpuAtt[dst]
	share := bytes / float64(nbest)
	for j, li := range r.links(src) {
		if r.firstD[j] != best {
			continue
		}
		add(Directed(t, li, src), share)
		switch o, dist := topo.Other(t, li, src), int32(best-1); {
		case dist == 1:
			if err := s.last(o, dst, share, add); err != nil {
				return err
			}
		case dist > 1:
			s.wait[att] = append(s.wait[att], mass{o, dist, share})
		}
	}
	if best > 2 {
		// Every share split in Flush arrives at the one attachment switch.
		return s.last(r.attSets[att][0], dst, bytes, add)
	}
	return nil
}

// last splits m standing at v, next to GPU dst, over the links to dst.
func (s *Spreader) last(v, dst int32, m float64, add func(DirLink, float64)) error {
	r := s.r
	c := r.NextHops(r.hopBuf[:0], v, dst, 1)
	r.hopBuf = c
	if len(c) == 0 {
		return fmt.Errorf("internal: no next hop at node %d towards GPU %d", v, dst)
	}
	for _, d := range c {
		add(d, m/float64(len(c)))
	}
	return nil
}

// Flush spreads what Add left waiting, down to the destinations'
// attachment switches, and empties s.
func (s *Spreader) Flush(add func(DirLink, float64)) error {
	for att, ms := range s.wait {
		if len(ms) == 0 {
			continue
		}
		// Highest level first; a switch stands at one level for an
		// attachment set, so merging by node merges within levels.
		slices.SortFunc(ms, func(a, b mass) int {
			if a.dist != b.dist {
				return int(b.dist - a.dist)
			}
			return int(a.node - b.node)
		})
		front := s.front[:0]
		for dist := ms[0].dist; dist >= 2; dist-- {
			for len(ms) > 0 && ms[0].dist == dist {
				front = append(front, ms[0])
				ms = ms[1:]
			}
			front = merge(front)
			next := s.next[:0]
			for _, fm := range front {
				c := s.r.candidates(fm.node, int32(att), int(dist))
				if len(c) == 0 {
					return fmt.Errorf("internal: no next hop at node %d towards attachment set %d", fm.node, att)
				}
				x := fm.m / float64(len(c))
				for _, h := range c {
					add(h.dl, x)
					if dist > 2 {
						next = append(next, mass{h.next, dist - 1, x})
					}
				}
			}
			s.next, front = front, next
		}
		s.front = front[:0]
		s.wait[att] = s.wait[att][:0]
	}
	return nil
}
