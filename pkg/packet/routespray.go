package packet

import "github.com/fabricsim/fabricsim/pkg/route"

// ROUTING spray: every packet takes its own path, hashed from the queue
// pair and its sequence number at every switch (a retransmission repeats
// its original's path).
var sprayForwarder = forwarder{choose: func(_ *forwarding, c []route.DirLink, qpHash uint64, pkt *packet, v int32, _ []port, _ int64) route.DirLink {
	return c[route.Pick(qpHash^uint64(pkt.seq)*0x9e3779b97f4a7c15, v, len(c))]
}}
