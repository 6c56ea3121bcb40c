package packet

import "github.com/fabricsim/fabricsim/pkg/route"

// ROUTING flowlet: a queue pair's packets stay on one hashed path until it
// has been idle for FLOWLET_GAP_US, then pick a new one. Its state is a
// flowlet per queue pair slot (forwarding.flowlets), stamped on each data
// packet as it leaves (sent).
var flowletForwarder = forwarder{flowlets: true, choose: func(_ *forwarding, c []route.DirLink, qpHash uint64, pkt *packet, v int32, _ []port, _ int64) route.DirLink {
	return c[route.Pick(qpHash^uint64(pkt.flowlet)*0x9e3779b97f4a7c15, v, len(c))]
}}

// flowlet is a queue pair's flowlet state.
type flowlet struct {
	last int64  // when its last data packet left
	id   uint16 // current flowlet, carried by its packets
}

// sent stamps a data packet leaving queue pair qi at now with its flowlet:
// a new one after an idle gap longer than FLOWLET_GAP_US (0 under the
// other policies).
func (f *forwarding) sent(qi int32, now int64) uint16 {
	if f.flowlets == nil {
		return 0
	}
	fl := &f.flowlets[qi]
	if now-fl.last > f.gapPs {
		fl.id++
	}
	fl.last = now
	return fl.id
}
