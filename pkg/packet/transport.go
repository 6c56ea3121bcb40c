package packet

// Transport is how a NIC recovers lost packets (the TRANSPORT key).
//
//   - roce (default, as SimAI): the receiver accepts packets in order only
//     and NACKs a gap; the sender goes back to the first byte asked for
//     (go-back-N), or to its first unacknowledged byte after RTO_US.
//   - sack: a selective-acknowledgement transport of the IRN/UEC family.
//     The receiver places out-of-order packets directly and acknowledges
//     each with its cumulative sequence plus that packet (a SACK); it never
//     NACKs. The sender keeps a scoreboard of SACKed packets and
//     retransmits only those it takes for lost: a packet not SACKed while
//     a later one was (under ECMP, where packets keep their order), or
//     three later ones were (TCP's duplicate threshold, under per-packet
//     routing, so that reordering is not taken for loss), or every later
//     one up to the message's end was (no more SACKs will come); after a
//     timeout, every packet not SACKed. Retransmissions go before new data
//     and are not held by the window; congestion control is unchanged.
type Transport uint8

// The transports.
const (
	TransportRoCE Transport = iota
	TransportSACK
)

var transportNames = [...]string{"roce", "sack"}

func (t Transport) String() string { return transportNames[t] }

// ParseTransport reads a TRANSPORT value.
func ParseTransport(s string) (Transport, error) { return parseEnum[Transport](s, transportNames[:]) }

// sackDupThresh is how many SACKed packets after a hole make it a loss
// under per-packet routing, where packets overtake each other; on one
// path (ECMP) any hole is a loss.
const sackDupThresh = 3

// sackQP is a queue pair's selective-retransmission state.
type sackQP struct {
	rtx    int64 // retransmissions look from here on (past the last one sent)
	headAt int64 // when the first unacknowledged packet was last resent, 0 if not
	una    int64 // the first unacknowledged byte headAt and later refer to
	sacked int32 // entries on its scoreboard: 0 spares the lookup per scan
	later  int32 // SACKs since then of packets sent after that resend
	all    bool  // after a timeout: every packet not SACKed below sndNxt is lost
}

// onSACK records that queue pair qi's receiver holds the packet at seq,
// sent at time sent, and forgets what the cumulative acknowledgement now
// covers. A resent first packet still missing while packets sent after
// it arrive (dupThresh of them) was lost again: it is resent once more,
// rather than waiting for the timeout.
func (s *Sim) onSACK(qi int32, seq, sent int64) {
	q := &s.qps[qi]
	st := &s.sackQPs[qi]
	if seq >= q.sndUna && seq < q.sndNxt {
		s.sacked.add(qi, seq)
	}
	s.sacked.trim(qi, q.sndUna)
	st.sacked = int32(len(s.sacked.of[qi]))
	switch {
	case st.headAt == 0:
	case st.una != q.sndUna:
		st.headAt, st.later = 0, 0 // it arrived
	case sent > st.headAt && seq > q.sndUna:
		if st.later++; int(st.later) >= s.dupThresh {
			st.rtx, st.headAt, st.later = q.sndUna, 0, 0
		}
	}
}

// resent notes a retransmission of the packet at seq.
func (s *Sim) resent(qi int32, seq int64) {
	st := &s.sackQPs[qi]
	if seq == s.qps[qi].sndUna {
		st.headAt, st.una, st.later = s.now, seq, 0
	}
}

// lostSeq returns the first packet of queue pair qi to retransmit, or -1.
func (s *Sim) lostSeq(qi int32) int64 {
	st := &s.sackQPs[qi]
	if st.sacked == 0 && !st.all {
		return -1
	}
	q := &s.qps[qi]
	l := s.sacked.of[qi]
	pay := int64(s.cfg.PayloadSize)
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
		if st.all || beyond >= s.dupThresh || tail {
			return seq
		}
		return -1 // too few SACKs beyond it, and beyond any later hole
	}
	st.all = false // a timeout's round is over
	return -1
}
