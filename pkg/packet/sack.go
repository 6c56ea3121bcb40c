package packet

import "github.com/fabricsim/fabricsim/internal/grow"

// TransportSACK is TRANSPORT sack: a selective-acknowledgement transport
// of the IRN/UEC family. The receiver places out-of-order packets
// directly and acknowledges each with its cumulative sequence plus that
// packet (a SACK); it never NACKs. The sender keeps a scoreboard of
// SACKed packets and retransmits only those it takes for lost: a packet
// not SACKed while a later one was (under ECMP, where packets keep their
// order), or three later ones were (TCP's duplicate threshold, under
// per-packet routing, so that reordering is not taken for loss), or every
// later one up to the message's end was (no more SACKs will come); after
// a timeout, every packet not SACKed. Retransmissions go before new data
// and are not held by the window; congestion control is unchanged.
const TransportSACK Transport = 1

// The surrogate is not for it: its scoreboard would wait for SACKs of
// packets the predictor delivers or the frozen fabric holds.
var selectiveKind = transportKind{name: "sack", doc: "selective acknowledgements (IRN/UEC family)",
	caps: transportCaps{placesOutOfOrder: true, ackEach: true},
	new:  func(h transportHost, c transportConfig) transport { return newSelective(h, c) }}

// sackDupThresh is how many SACKed packets after a hole make it a loss
// under per-packet routing, where packets overtake each other; on one
// path (ECMP) any hole is a loss.
const sackDupThresh = 3

// selective is the senders' side of TRANSPORT sack: per queue pair slot a
// scoreboard of SACKed packets and the retransmission state. (Receivers
// place every out-of-order packet, the Sim's placement, and acknowledge
// each.)
type selective struct {
	h         transportHost
	payload   int64
	board     *seqSet
	qps       []sackQP
	dupThresh int // SACKs beyond a hole that make it a loss
}

// sackQP is a queue pair's selective-retransmission state.
type sackQP struct {
	rtx    int64 // retransmissions look from here on (past the last one sent)
	headAt int64 // when the first unacknowledged packet was last resent, 0 if not
	una    int64 // the first unacknowledged byte headAt and later refer to
	sacked int32 // entries on its scoreboard: 0 spares the lookup per scan
	later  int32 // SACKs since then of packets sent after that resend
	all    bool  // after a timeout: every packet not SACKed below sndNxt is lost
}

func newSelective(h transportHost, c transportConfig) *selective {
	t := &selective{h: h, payload: c.payload, board: newSeqSet(), dupThresh: 1}
	if c.perPacket {
		t.dupThresh = sackDupThresh
	}
	return t
}

func (t *selective) addQP() { t.qps = grow.Append(t.qps, sackQP{}) }

func (t *selective) open(qi int32) {
	t.board.clear(qi)
	t.qps[qi] = sackQP{}
}

func (t *selective) close(qi int32) { t.board.clear(qi) }

func (t *selective) sackedBytes(qi int32) int64 {
	return int64(t.qps[qi].sacked) * t.payload
}

// tag puts in the acknowledgement which packet it SACKs besides the
// cumulative seq, as its index (the link field is free on a control
// frame).
func (t *selective) tag(pkt *packet) { pkt.link = int32(pkt.seq / t.payload) }

// timeout: every unacknowledged packet not SACKed is lost.
func (t *selective) timeout(q *qp, qi int32) { t.qps[qi] = sackQP{rtx: q.sndUna, all: true} }

// gap is not reached (a SACK receiver places every packet); were it, the
// packet would be a duplicate to re-acknowledge.
func (t *selective) gap(pi int32, q *qp) bool {
	t.h.discard(pi)
	t.h.reply(pi, pktAck, q.rcvNext)
	return true
}

// acked records that queue pair qi's receiver holds the packet the
// acknowledgement SACKs, sent at time pkt.sent, and forgets what the
// cumulative acknowledgement now covers. A resent first packet still
// missing while packets sent after it arrive (dupThresh of them) was lost
// again: it is resent once more, rather than waiting for the timeout.
func (t *selective) acked(q *qp, qi int32, pkt *packet) {
	seq, sent := int64(pkt.link)*t.payload, pkt.sent
	st := &t.qps[qi]
	if seq >= q.sndUna && seq < q.sndNxt {
		t.board.add(qi, seq)
	}
	t.board.trim(qi, q.sndUna)
	st.sacked = int32(len(t.board.of[qi]))
	switch {
	case st.headAt == 0:
	case st.una != q.sndUna:
		st.headAt, st.later = 0, 0 // it arrived
	case sent > st.headAt && seq > q.sndUna:
		if st.later++; int(st.later) >= t.dupThresh {
			st.rtx, st.headAt, st.later = q.sndUna, 0, 0
		}
	}
}

// resent notes a retransmission of the packet at seq.
func (t *selective) resent(q *qp, qi int32, seq, size int64) {
	st := &t.qps[qi]
	st.rtx = seq + size
	if seq == q.sndUna {
		st.headAt, st.una, st.later = t.h.now(), seq, 0
	}
}

// retransmit returns the first packet of queue pair qi to resend, or -1.
func (t *selective) retransmit(q *qp, qi int32) int64 {
	st := &t.qps[qi]
	if st.sacked == 0 && !st.all {
		return -1
	}
	l := t.board.of[qi]
	pay := t.payload
	k := 0
	for seq := max(st.rtx, q.sndUna); seq < q.sndNxt; seq += pay {
		for k < len(l) && l[k] < seq {
			k++
		}
		if k < len(l) && l[k] == seq {
			continue
		}
		beyond := len(l) - k
		// The tail: every packet after the hole up to the last one is
		// SACKed, so no further SACK will come to make it a loss.
		tail := q.sndNxt >= q.size && int64(beyond) == (q.sndNxt-seq-1)/pay && beyond > 0
		if st.all || beyond >= t.dupThresh || tail {
			return seq
		}
		return -1 // too few SACKs beyond it, and beyond any later hole
	}
	st.all = false // a timeout's round is over
	return -1
}
