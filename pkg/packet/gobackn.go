package packet

// TransportRoCE is TRANSPORT roce, SimAI's and the default: a receiver
// that does not place an out-of-order packet discards it and NACKs the
// gap; the sender goes back to the byte asked for, or after RTO_US to its
// first unacknowledged one.
const TransportRoCE Transport = 0

var goBackNKind = transportKind{name: "roce", doc: "RoCE go-back-N",
	caps: transportCaps{surrogate: true},
	new:  func(h transportHost, _ transportConfig) transport { return goBackN{h} }}

type goBackN struct{ h transportHost }

func (goBackN) addQP()                          {}
func (goBackN) open(int32)                      {}
func (goBackN) close(int32)                     {}
func (goBackN) retransmit(*qp, int32) int64     { return -1 }
func (goBackN) sackedBytes(int32) int64         { return 0 }
func (goBackN) resent(*qp, int32, int64, int64) {}
func (goBackN) tag(*packet)                     {}
func (goBackN) timeout(q *qp, _ int32)          { q.sndNxt = q.sndUna }
func (goBackN) acked(q *qp, _ int32, pkt *packet) {
	if pkt.kind == pktNack && pkt.seq < q.sndNxt {
		q.sndNxt = pkt.seq
	}
}

// gap NACKs once per expected byte and round trip; later packets past
// the same gap are discarded silently.
func (t goBackN) gap(pi int32, q *qp) bool {
	t.h.discard(pi)
	if now := t.h.now(); q.nackSeq != q.rcvNext || now-q.nackAt > q.cc.BaseRTT {
		q.nackSeq, q.nackAt = q.rcvNext, now
		t.h.reply(pi, pktNack, q.rcvNext)
		return true
	}
	return false
}
