package analytical

import (
	"slices"

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
	// under the even split, and the NIC links' alone under the even split.
	draws       [][]float64
	spread, nic []float64
	priced      map[int64]float64 // staggerExtra by size
}

// levelConn is a connection of a stagger: merged pair pair's kth.
type levelConn struct{ pair, k int32 }

// newStagger finds the posting level of each connection across servers
// of co (merged pairs, of its group and siblings), nil when co is not a
// paced AllToAll across servers (collective.A2AStaggerOf).
func (c *collLoad) newStagger(co *stream.Collective, algo collective.Algo, groups [][]int32, pairs []pair) *stagger {
	at := map[int32][2]int32{} // rank: its group and position
	posts := make([][]int32, len(groups))
	for gi, ranks := range groups {
		s, ok := c.fab.A2AStaggerOf(co, algo, ranks, co.Size)
		if !ok {
			return nil
		}
		posts[gi] = s.Posts
		for p, r := range ranks {
			at[r] = [2]int32{int32(gi), int32(p)}
		}
	}
	st := &stagger{algo: algo, ranks: groups[0]}
	type lc struct {
		q int32
		levelConn
	}
	var all []lc
	for i, p := range pairs {
		a, okA := at[p.a]
		b, okB := at[p.b]
		if !okA || !okB || a[0] != b[0] {
			continue
		}
		n := int32(len(groups[a[0]]))
		q := posts[a[0]][a[1]*n+b[1]]
		if q < 0 {
			continue
		}
		for k := range max(p.conns, 1) {
			all = append(all, lc{q, levelConn{int32(i), int32(k)}})
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(x, y lc) int { return int(y.q - x.q) })
	for i, x := range all {
		if i == 0 || x.q != all[i-1].q {
			if i > 0 {
				st.ends = append(st.ends, i)
			}
			st.levels = append(st.levels, x.q)
		}
		st.conns = append(st.conns, x.levelConn)
	}
	st.ends = append(st.ends, len(all))
	return st
}

// levelTimes is, per level of st, the busiest link's time (ps per byte)
// under the bytes of the connections posted at that level or later, each
// connection's bytes put on its links by each: of every link beyond
// NVLink (all), and of the NIC links alone (nic).
func (c *collLoad) levelTimes(st *stagger, pairs []pair, each func(i, k int, x float64, add func(route.DirLink, float64)) error) (all, nic []float64, err error) {
	all, nic = make([]float64, len(st.levels)), make([]float64, len(st.levels))
	touched := c.accTouched[:0]
	var runAll, runNIC float64
	add := func(l route.DirLink, x float64) {
		if c.acc[l] == 0 {
			touched = append(touched, l)
		}
		c.acc[l] += x * 8e12 / c.r.Bandwidth(l)
		switch c.kinds[l] {
		case kindOther:
		case kindNIC, kindPCIe:
			runNIC = max(runNIC, c.acc[l])
			fallthrough
		default:
			runAll = max(runAll, c.acc[l])
		}
	}
	start := 0
	for li, end := range st.ends {
		for _, lc := range st.conns[start:end] {
			p := pairs[lc.pair]
			if err = each(int(lc.pair), int(lc.k), p.x/float64(max(p.conns, 1)), add); err != nil {
				break
			}
		}
		all[li], nic[li] = runAll, runNIC
		start = end
	}
	for _, l := range touched {
		c.acc[l] = 0
	}
	c.accTouched = touched
	return all, nic, err
}

// spreadLevels sets st's even-split level times (spread, and nic from
// the NIC links alone).
func (c *collLoad) spreadLevels(st *stagger, pairs []pair) error {
	var err error
	st.spread, st.nic, err = c.levelTimes(st, pairs, func(i, k int, x float64, add func(route.DirLink, float64)) error {
		return c.r.SpreadPort(pairs[i].a, pairs[i].b, pairs[i].port+k, x, add)
	})
	return err
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
		x = st.extra(s, size)
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
// its draw's path; one of several is hashed anew piece by piece, so all
// its bytes go as the even split does, its last piece on the draw's path.
func (st *stagger) extra(s collective.A2AStagger, size int64) float64 {
	pieces, paced, b := float64(s.Pieces), float64((s.Pieces-1)*s.IntervalPs), float64(size)
	chain := func(last, all []float64) float64 {
		t := 0.0
		for i, q := range st.levels {
			t = max(t, float64(int64(q)*s.OpPs)+max(paced+b*last[i]/pieces, b*all[i]))
		}
		return t
	}
	sum := 0.0
	for _, dr := range st.draws {
		all := dr
		if s.Pieces > 1 {
			all = st.spread
		}
		sum += chain(dr, all)
	}
	return max(0, sum/float64(len(st.draws))-chain(st.nic, st.nic))
}
