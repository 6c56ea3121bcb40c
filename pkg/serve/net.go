package serve

import (
	"math"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// network moves the KV-cache flows over the fabric with max-min fair
// sharing of every directed link, flows added and removed as the serving
// loop runs. pkg/analytical's fluid solver drives itself from a stream's
// flow DAG and cannot take flows from outside while it runs, so this is a
// small solver of the same model: the rates are re-solved by progressive
// filling over the active flows whenever one starts or drains (a few
// dozen KV transfers are in flight at once, not the millions of flows a
// collective trace has). A flow sends its bits at its rate, then arrives
// after its path's latency: alone on an idle path it takes
// bits / bottleneck + latency.
type network struct {
	r     *route.Router
	now   des.Time
	flows []*netFlow
	dirty bool
	// alone: every flow runs at its path's bottleneck as if it had the
	// fabric to itself (SimAI's contention-free transfer), for comparison.
	alone bool

	// scratch of solve, per directed link
	resid []float64
	count []int32
	used  []route.DirLink
}

type netFlow struct {
	owner int // the request
	path  []route.DirLink
	lat   des.Time
	bits  float64 // left to send at now
	rate  float64 // bit/s
	fixed bool    // scratch of solve
}

func newNetwork(r *route.Router) *network {
	n := r.DirLinks()
	return &network{r: r, resid: make([]float64, n), count: make([]int32, n)}
}

// add starts a flow of size bytes over path now.
func (n *network) add(owner int, path []route.DirLink, size int64) {
	n.flows = append(n.flows, &netFlow{owner: owner, path: path, lat: n.r.Latency(path), bits: float64(size) * 8})
	n.dirty = true
}

// advance moves time to t, draining every flow at its rate.
func (n *network) advance(t des.Time) {
	if t <= n.now {
		return
	}
	dt := (t - n.now).Seconds()
	for _, f := range n.flows {
		f.bits -= f.rate * dt
	}
	n.now = t
}

// next is when the first active flow drains (des.Never without flows).
func (n *network) next() des.Time {
	if n.dirty {
		n.solve()
	}
	at := des.Never
	for _, f := range n.flows {
		if f.rate > 0 {
			at = min(at, n.now.Add(des.Time(math.Ceil(math.Max(f.bits, 0)/f.rate*1e12))))
		}
	}
	return at
}

// drained removes the flows that have sent their bits by now and calls
// done with each one's owner and arrival time (now + path latency), in
// the order the flows were added.
func (n *network) drained(done func(owner int, at des.Time)) {
	kept := n.flows[:0]
	for _, f := range n.flows {
		// Within a picosecond of sending at its rate: rounding, not bytes.
		if f.bits <= f.rate*1e-12 {
			done(f.owner, n.now.Add(f.lat))
			n.dirty = true
			continue
		}
		kept = append(kept, f)
	}
	clear(n.flows[len(kept):])
	n.flows = kept
}

// solve sets the max-min fair rates: every flow's rate rises together;
// when a link runs out of capacity, the flows crossing it keep the share
// it gives them and the rest go on rising.
func (n *network) solve() {
	n.dirty = false
	if n.alone {
		for _, f := range n.flows {
			f.rate = n.r.Bottleneck(f.path)
		}
		return
	}
	n.used = n.used[:0]
	for _, f := range n.flows {
		f.fixed, f.rate = false, 0
		for _, l := range f.path {
			if n.count[l] == 0 {
				n.used = append(n.used, l)
				n.resid[l] = n.r.Bandwidth(l)
			}
			n.count[l]++
		}
	}
	left := len(n.flows)
	for left > 0 {
		// The bottleneck: the least share per unfrozen flow (ties: the
		// first link met, so runs are deterministic).
		best, share := route.DirLink(-1), math.Inf(1)
		for _, l := range n.used {
			if c := n.count[l]; c > 0 {
				if s := n.resid[l] / float64(c); s < share {
					best, share = l, s
				}
			}
		}
		if best < 0 { // flows with empty paths (never: src != dst)
			for _, f := range n.flows {
				if !f.fixed {
					f.fixed, f.rate = true, math.Inf(1)
					left--
				}
			}
			break
		}
		share = max(share, 0)
		for _, f := range n.flows {
			if f.fixed || !crosses(f.path, best) {
				continue
			}
			f.fixed, f.rate = true, share
			left--
			for _, l := range f.path {
				n.resid[l] -= share
				n.count[l]--
			}
		}
	}
	for _, l := range n.used {
		n.count[l] = 0
	}
}

func crosses(path []route.DirLink, l route.DirLink) bool {
	for _, p := range path {
		if p == l {
			return true
		}
	}
	return false
}
