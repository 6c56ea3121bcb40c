package packet

import (
	"fmt"

	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Routing is how switches forward data packets (the ROUTING key): the
// policy every backend shares (route.Policy). Acknowledgements always take
// their queue pair's hashed reverse path.
//
//   - ecmp (default, as SimAI and ns-3): a queue pair's packets all follow
//     one path, chosen by hashing the flow over the equal-cost next hops.
//   - spray: every packet takes its own path, hashed from the queue pair
//     and its sequence number at every switch (a retransmission repeats its
//     original's path).
//   - flowlet: a queue pair's packets stay on one hashed path until it has
//     been idle for FLOWLET_GAP_US (default 5 us, about 30 packet times at
//     400 Gbit/s: longer than the path delay differences of a two-tier
//     fabric), then pick a new one.
//   - adaptive: as Spectrum-X switches do, each switch sends every packet to
//     the eligible egress (a next hop on a shortest path) with the fewest
//     bytes queued at the packet's priority or still on the wire, never a
//     paused one unless all are; ties go to a per-queue-pair hashed choice.
//
// Each per-packet policy is a file: routespray.go, routeflowlet.go,
// routeadaptive.go. Under them packets may arrive out of order.
// The receiving NIC then places them directly (Spectrum-X's direct data
// placement) and acknowledges cumulatively, never with a NACK, so a loss is
// repaired only by the sender's timeout (RTO_US) going back to its first
// unacknowledged byte: these modes are meant for lossless (PFC) fabrics.
type Routing = route.Policy

// The routings.
const (
	RouteECMP     = route.ECMP
	RouteSpray    = route.Spray
	RouteFlowlet  = route.Flowlet
	RouteAdaptive = route.Adaptive
)

var routingNames = route.PolicyNames

// ParseRouting reads a ROUTING value.
func ParseRouting(s string) (Routing, error) { return parseEnum[Routing](s, routingNames[:]) }

// forwarder is a routing policy's part in the packet core: how switches
// choose among the egresses on shortest paths. A new policy is a file
// holding its forwarder and its line in forwarders (its name is pkg/route's,
// the spelling every backend shares).
type forwarder struct {
	// choose picks the egress among c (two or more next hops on shortest
	// paths from switch v) for data packet pkt of a queue pair hashing to
	// qpHash, at time now.
	choose func(f *forwarding, c []route.DirLink, qpHash uint64, pkt *packet, v int32, ports []port, now int64) route.DirLink
	// readsPause: choose reads the egresses' PAUSE state, which the PFC
	// applies first (pfc.settle).
	readsPause bool
	// flowlets: it keeps a flowlet per queue pair, stamped on each data
	// packet as it leaves (forwarding.sent).
	flowlets bool
}

// forwarders is every per-packet policy's forwarder, by its Routing. Under
// ecmp none is asked: a queue pair's hashed path is its packets'.
var forwarders = [...]forwarder{
	RouteSpray:    sprayForwarder,
	RouteFlowlet:  flowletForwarder,
	RouteAdaptive: adaptiveForwarder,
}

// forwarding is the switches' forwarding policy: which of the egresses on
// a shortest path a data packet takes (ROUTING, by its forwarder), and the
// per-queue-pair state the policies keep. Under ecmp it is not consulted:
// a queue pair's hashed path is its packets'.
type forwarding struct {
	mode     Routing
	gapPs    int64     // FLOWLET_GAP_US
	flowlets []flowlet // per queue pair slot (flowlet only, routeflowlet.go)
	// hashes is each queue pair slot's ECMP hash (all but ecmp), which
	// seeds its per-packet choices: the pair's, not its slot's, so a
	// partitioned run (whose slots are numbered otherwise, and whose
	// packets use shadow slots abroad) chooses as the single loop does.
	hashes []uint64
}

// checkForwarder says whether the packet core can route under mode.
func checkForwarder(mode Routing) error {
	if mode.PerPacket() && (int(mode) >= len(forwarders) || forwarders[mode].choose == nil) {
		return fmt.Errorf("ROUTING %s: the packet backend has no forwarder for it", mode)
	}
	return nil
}

// perPacket reports whether switches choose per packet (all but ecmp).
func (f *forwarding) perPacket() bool { return f.mode.PerPacket() }

// addQP makes room for a new queue pair slot.
func (f *forwarding) addQP() {
	if forwarders[f.mode].flowlets {
		f.flowlets = grow.Append(f.flowlets, flowlet{})
	}
	if f.perPacket() {
		f.hashes = grow.Append(f.hashes, 0)
	}
}

// open starts queue pair slot qi afresh for a pair with ECMP hash h: a
// slot's next pair starts a flowlet of its own, as in a slot never used.
func (f *forwarding) open(qi int32, h uint64) {
	if f.hashes != nil {
		f.hashes[qi] = h
	}
	if f.flowlets != nil {
		f.flowlets[qi] = flowlet{}
	}
}

// hash is queue pair slot qi's ECMP hash (0 under ecmp).
func (f *forwarding) hash(qi int32) uint64 {
	if f.hashes == nil {
		return 0
	}
	return f.hashes[qi]
}

// choose picks the egress among c for data packet pkt, as the policy's
// forwarder does.
func (f *forwarding) choose(c []route.DirLink, qpHash uint64, pkt *packet, v int32, ports []port, now int64) route.DirLink {
	return forwarders[f.mode].choose(f, c, qpHash, pkt, v, ports, now)
}

// forward picks the egress of data packet pkt, standing at switch v, for
// its hop pkt.hop under a per-packet routing: the shortest-path next hops
// from the router, the choice from the forwarding policy. The hashed
// path's link is the answer when the queue pair ends at a switch (NVLS),
// where no choice is made.
func (fa *fabric) forward(pkt *packet, v int32) route.DirLink {
	s := fa.s
	base := int(pkt.path) * fa.pathW
	n := int(fa.pathLen[pkt.path])
	dst := fa.ports[fa.paths[base+n-1]].to
	if dst >= int32(s.t.GPUs) {
		return fa.paths[base+int(pkt.hop)]
	}
	fa.hops = s.r.NextHops(fa.hops[:0], v, dst, n-int(pkt.hop))
	c := fa.hops
	switch len(c) {
	case 0:
		// The packet stands where no shortest path goes on: only a link
		// that failed under it can do that; its hashed path's link drops it.
		return fa.paths[base+int(pkt.hop)]
	case 1:
		return c[0]
	}
	if forwarders[fa.fwding.mode].readsPause {
		for _, d := range c {
			s.pfc.settle(&fa.ports[d])
		}
	}
	return fa.fwding.choose(c, fa.fwding.hashes[pkt.qp], pkt, v, fa.ports, s.now)
}

// UplinkImbalance says how evenly the leaves spread their traffic over
// their uplinks (ports from a first-tier switch to a higher one): for each
// leaf whose uplinks carried any bytes, the busiest uplink's wire bytes
// over its uplinks' mean; it returns the worst leaf's ratio (1 = perfectly
// even, k = all on one of k) and the mean ratio over those leaves, and how
// many leaves there were (0 on a fabric without such uplinks). Per leaf,
// because a ring or an AllToAll loads leaves unequally whatever the
// routing.
func (s *Sim) UplinkImbalance() (worst, mean float64, leaves int) {
	type acc struct {
		sum, max float64
		n        int
	}
	per := map[int32]*acc{}
	for i := range s.fab.ports {
		p := &s.fab.ports[i]
		if s.t.Nodes[p.from].Tier != 2 || s.t.Nodes[p.to].Tier <= 2 {
			continue
		}
		a := per[p.from]
		if a == nil {
			a = &acc{}
			per[p.from] = a
		}
		b := float64(p.txBytes)
		a.sum += b
		a.max = max(a.max, b)
		a.n++
	}
	var sum float64
	for _, a := range per {
		if a.sum == 0 {
			continue
		}
		r := a.max / (a.sum / float64(a.n))
		worst = max(worst, r)
		sum += r
		leaves++
	}
	if leaves == 0 {
		return 0, 0, 0
	}
	return worst, sum / float64(leaves), leaves
}
