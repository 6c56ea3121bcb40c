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

// transport is a NIC's loss recovery, one implementation per TRANSPORT
// (gobackn.go, sack.go): what a sender resends before new data, what of
// its window has left the network, how it reacts to an acknowledgement
// and to a timeout, and what a receiver does with a packet past a gap it
// does not place. The Sim keeps the queue pairs, their windows, pacing
// and congestion control, and the receivers' placement of out-of-order
// packets (which per-packet routing needs under either transport).
type transport interface {
	addQP()                           // a new queue pair slot
	open(qi int32)                    // slot qi holds a new pair
	close(qi int32)                   // pair qi is done
	retransmit(q *qp, qi int32) int64 // the packet to resend before new data, or -1
	// sackedBytes is what of pair qi's window has left the network past
	// its first unacknowledged byte (RFC 6675's pipe).
	sackedBytes(qi int32) int64
	resent(q *qp, qi int32, seq, size int64) // seq, below sndNxt, was sent again
	acked(q *qp, qi int32, pkt *packet)      // an ACK or NACK arrived, sndUna updated
	timeout(q *qp, qi int32)                 // RTO_US without progress, bytes in flight
	ackEach() bool                           // acknowledge every out-of-order placement
	// gap handles data packet pi arriving past receiver q's next byte when
	// it is not placed; true when pi became a control frame.
	gap(pi int32, q *qp) bool
	tag(pkt *packet) // marks a data packet turning into its acknowledgement
}

func newTransport(s *Sim) transport {
	if s.cfg.Transport == TransportSACK {
		return newSelective(s)
	}
	return goBackN{s}
}
