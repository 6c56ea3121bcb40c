package analytical

import (
	"math"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// stagger is a paced AllToAll's network connections by when their proxies
// post them (collective.A2AStagger): a connection posted late starts late,
// then its pieces take their path's time, shared with the connections
// still running. So from any posting level on, the connections posted
// then or later need, after it, their paced pieces and then their last
// pieces together, or all their bytes, on the busiest link they load:
// the closed form's chain (allToAllPs' a2aChain, which counts the NICs
// alone), with the fabric's links as well (staggerExtra).
type stagger struct {
	algo  collective.Algo
	ranks []int32
	// levels: the ops posted before a level's connections, descending;
	// conns: the connections, level by level (ends: where each ends).
	levels []int32
	conns  []levelConn
	ends   []int
	// Per level, the busiest link's time (ps per byte of the collective's
	// size) for the bytes of the connections posted at that level or
	// later: per ECMP draw (one draw, the even split, when not hashed),
	// and under the even split (spread, found when first needed).
	draws  []levelDraw
	spread []float64
	priced map[int64]float64 // staggerExtra by size
}

// levelConn is a connection of a stagger: merged pair pair's kth, from a
// to b on port port, x bytes per byte of the collective's size.
type levelConn struct {
	pair, k, a, b, port int32
	x                   float64
}

// levelDraw is levelTimes' result: per level, the busiest link beyond
// NVLink's time and the busiest NIC link's.
type levelDraw struct{ all, nic []float64 }

// newStagger finds the posting level of each connection across servers
// of co (merged pairs, of its group and siblings, those inside one server
// left out), nil when co is not a paced AllToAll across servers
// (collective.A2AStaggerOf), and how many
// pairs across servers it leaves out because they join GPUs of no group
// or of two (a PXN relay outside a group not aligned to servers).
func (c *collLoad) newStagger(co *stream.Collective, algo collective.Algo, groups [][]int32, pairs []pair) (*stagger, int) {
	gpus := c.in.Topology.GPUs
	group, pos := make([]int32, gpus), make([]int32, gpus) // by rank: its group (+1) and position
	posts := make([][]int32, len(groups))
	first := -1 // the first group across servers, which stands for the others' pace
	for gi, ranks := range groups {
		s, ok := c.fab.A2AStaggerOf(co, algo, ranks, co.Size)
		if !ok && c.oneServer(ranks) {
			continue // a sibling inside one server (groups not aligned to servers) posts no network op
		}
		if !ok {
			return nil, 0
		}
		if first < 0 {
			first = gi
		}
		posts[gi] = s.Posts
		for p, r := range ranks {
			group[r], pos[r] = int32(gi)+1, int32(p)
		}
	}
	// The connections by level, counted then placed (levels are op counts).
	var conns []levelConn
	var qs []int32
	top := int32(-1)
	skipped := 0
	for i, p := range pairs {
		if p.a >= int32(gpus) || p.b >= int32(gpus) {
			continue
		}
		if group[p.a] == 0 || group[p.a] != group[p.b] {
			if nodes := c.in.Topology.Nodes; int(max(p.a, p.b)) < len(nodes) && nodes[p.a].Server != nodes[p.b].Server {
				skipped++
			}
			continue
		}
		g := group[p.a] - 1
		q := posts[g][pos[p.a]*int32(len(groups[g]))+pos[p.b]]
		if q < 0 {
			continue
		}
		cs := max(p.conns, 1)
		for k := range cs {
			conns = append(conns, levelConn{pair: int32(i), k: int32(k), a: p.a, b: p.b, port: int32(p.port + k), x: p.x / float64(cs)})
			qs = append(qs, q)
		}
		top = max(top, q)
	}
	if len(conns) == 0 {
		return nil, skipped
	}
	at := make([]int, top+2) // where level q's connections start, from the top level
	for _, q := range qs {
		at[top-q+1]++
	}
	st := &stagger{algo: algo, ranks: groups[first], conns: make([]levelConn, len(conns))}
	for q := top; q >= 0; q-- {
		if n := at[top-q+1]; n > 0 {
			st.levels = append(st.levels, q)
			st.ends = append(st.ends, at[top-q]+n)
		}
		at[top-q+1] += at[top-q]
	}
	for i, q := range qs {
		st.conns[at[top-q]] = conns[i]
		at[top-q]++
	}
	return st, skipped
}

// levelTimes is, per level of st, the busiest link's time (ps per byte)
// under the bytes of the connections posted at that level or later, each
// connection's bytes put on its links by each: of every link beyond
// NVLink, and of the NIC links alone.
func (c *collLoad) levelTimes(st *stagger, each func(lc *levelConn, add func(route.DirLink, float64)) error) (levelDraw, error) {
	dr := levelDraw{make([]float64, len(st.levels)), make([]float64, len(st.levels))}
	touched := c.accTouched[:0]
	var runAll, runNIC float64
	add := func(l route.DirLink, share float64) {
		if c.acc[l] == 0 {
			touched = append(touched, l)
		}
		c.acc[l] += share * 8e12 / c.r.Bandwidth(l)
		switch c.kinds[l] {
		case kindOther:
		case kindNIC, kindPCIe:
			runNIC = max(runNIC, c.acc[l])
			fallthrough
		default:
			runAll = max(runAll, c.acc[l])
		}
	}
	var err error
	start := 0
levels:
	for li, end := range st.ends {
		for i := range st.conns[start:end] {
			if err = each(&st.conns[start+i], add); err != nil {
				break levels // a later level must not clear it
			}
		}
		dr.all[li], dr.nic[li] = runAll, runNIC
		start = end
	}
	for _, l := range touched {
		c.acc[l] = 0
	}
	c.accTouched = touched
	return dr, err
}

// spreadLevels is st's level times under the even split.
func (c *collLoad) spreadLevels(st *stagger) (levelDraw, error) {
	return c.levelTimes(st, func(lc *levelConn, add func(route.DirLink, float64)) error {
		return c.r.SpreadPort(lc.a, lc.b, int(lc.port), lc.x, add)
	})
}

// staggerExtra is what the fabric adds (ps) to a paced AllToAll of size
// bytes beyond its closed form's chain (allToAllPs), which counts each
// connection from its posting on its NIC alone (stagger.extra), by size.
func (c *collLoad) staggerExtra(st *stagger, co *stream.Collective, size int64) float64 {
	if x, ok := st.priced[size]; ok {
		return x
	}
	x := 0.0
	if s, ok := c.fab.A2AStaggerOf(co, st.algo, st.ranks, size); ok {
		if s.Pieces > 1 && st.spread == nil {
			// price spread the same pairs without error, so this one
			// cannot fail; if it did, the chain over the NICs stands
			if dr, err := c.spreadLevels(st); err == nil {
				st.spread = dr.all
			}
		}
		if s.Pieces <= 1 || st.spread != nil {
			x = st.extra(s, size)
		}
	}
	if st.priced == nil {
		st.priced = map[int64]float64{}
	}
	st.priced[size] = x
	return x
}

// extra is the draws' mean of the chain over every link less the chain
// over the NICs (size bytes, paced as s): from each level q on, q x
// OpPs, then the longer of the paced pieces and the last pieces' bytes
// or all the bytes, on the busiest link. A connection of one piece keeps
// its draw's path; one of several is hashed anew piece by piece, its last
// piece on the draw's path, and all its bytes between the draw's loads
// and the even split's (spread): a link's load is a sum of K pieces'
// independent hashes, so its spread about the even split's falls as
// 1/sqrt(K) of the draw's, whose connections go whole (hashedAll).
func (st *stagger) extra(s collective.A2AStagger, size int64) float64 {
	if len(st.draws) == 0 {
		return 0
	}
	pieces, paced, b := float64(s.Pieces), float64((s.Pieces-1)*s.IntervalPs), float64(size)
	chain := func(last, all []float64) float64 {
		t := 0.0
		for i, q := range st.levels {
			t = max(t, float64(int64(q)*s.OpPs)+max(paced+b*last[i]/pieces, b*all[i]))
		}
		return t
	}
	sum := 0.0
	var scratch []float64
	for _, dr := range st.draws {
		all := dr.all
		if s.Pieces > 1 && st.spread != nil {
			scratch = hashedAll(scratch, dr.all, st.spread, s.Pieces)
			all = scratch
		}
		sum += chain(dr.all, all) - chain(dr.nic, dr.nic)
	}
	return max(0, sum/float64(len(st.draws)))
}

// hashedAll is, per level, the busiest link's time for connections cut
// into pieces pieces each hashed on its own: the even split's (spread)
// plus the draw's excess over it (whole, each connection on one path)
// over sqrt(pieces), in dst.
func hashedAll(dst, whole, spread []float64, pieces int64) []float64 {
	dst = dst[:0]
	for i, w := range whole {
		dst = append(dst, shrink(spread[i], w, pieces))
	}
	return dst
}

// shrink is a mean of pieces draws' worst: base plus one draw's excess
// over it (x - base) over sqrt(pieces), the spread of a mean of that many
// draws (times 1/sqrt, as it always was: the same last bit).
func shrink(base, x float64, pieces int64) float64 {
	return base + (x-base)*(1/math.Sqrt(float64(pieces)))
}

// oneServer reports whether ranks all sit in one server.
func (c *collLoad) oneServer(ranks []int32) bool {
	nodes := c.in.Topology.Nodes
	for _, r := range ranks {
		if int(r) >= len(nodes) || nodes[r].Server != nodes[ranks[0]].Server {
			return false
		}
	}
	return true
}
