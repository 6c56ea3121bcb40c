package packet

import "github.com/fabricsim/fabricsim/pkg/route"

// ROUTING adaptive, as Spectrum-X switches do: the least loaded egress at
// the packet's priority (queued bytes and what is still on the wire; a
// paused egress only if all are), starting from a hashed one so that ties
// (an idle fabric) keep a queue pair on one path.
var adaptiveForwarder = forwarder{readsPause: true, choose: chooseLeastLoaded}

func chooseLeastLoaded(_ *forwarding, c []route.DirLink, qpHash uint64, pkt *packet, v int32, ports []port, now int64) route.DirLink {
	start := route.Pick(qpHash, v, len(c))
	best, bestLoad := c[start], int64(-1)
	for k := range c {
		d := c[(start+k)%len(c)]
		p := &ports[d]
		load := p.qBytes[pkt.q]
		if p.busyUntil > now { // the packet on the wire counts too
			load += int64(float64(p.busyUntil-now) / p.bitPs)
		}
		if p.pausedAt(pkt.q, now) {
			load = maxTime // paused: only if every egress is
		}
		if bestLoad < 0 || load < bestLoad {
			best, bestLoad = d, load
		}
	}
	return best
}
