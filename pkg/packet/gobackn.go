package packet

// goBackN is TRANSPORT roce, SimAI's: a receiver that does not place an
// out-of-order packet discards it and NACKs the gap; the sender goes back
// to the byte asked for, or after RTO_US to its first unacknowledged one.
type goBackN struct{ s *Sim }

func (goBackN) addQP()                          {}
func (goBackN) open(int32)                      {}
func (goBackN) close(int32)                     {}
func (goBackN) retransmit(*qp, int32) int64     { return -1 }
func (goBackN) sackedBytes(int32) int64         { return 0 }
func (goBackN) resent(*qp, int32, int64, int64) {}
func (goBackN) ackEach() bool                   { return false }
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
	s := t.s
	pkt := &s.pkts[pi]
	s.Stats.Discarded += int64(pkt.size)
	if q.nackSeq != q.rcvNext || s.now-q.nackAt > q.cc.BaseRTT {
		q.nackSeq, q.nackAt = q.rcvNext, s.now
		s.sendCtl(pi, pktNack, q.rcvNext, pkt.ecn)
		return true
	}
	return false
}
