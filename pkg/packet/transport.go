package packet

import "strings"

// Transport is how a NIC recovers lost packets (the TRANSPORT key): an
// index into transports, each implemented in its own file.
//
//   - roce (default, as SimAI; gobackn.go): the receiver accepts packets
//     in order only and NACKs a gap; the sender goes back to the first
//     byte asked for (go-back-N), or to its first unacknowledged byte
//     after RTO_US.
//   - sack (sack.go): a selective-acknowledgement transport of the
//     IRN/UEC family; its file says what it does.
type Transport uint8

// transports is every TRANSPORT value, by its Transport. A new transport
// is one file (its transportKind and its transport) and one line here.
// The table is a literal, not filled by init functions, as the TRANSPORT
// key's schema (schema.go) reads the names while the package initializes.
var transports = []transportKind{
	TransportRoCE: goBackNKind,
	TransportSACK: selectiveKind,
}

// transportKind is a transport's registration: its TRANSPORT name, a few
// words for the key's documentation, what the Sim must do for it
// (transportCaps), and how to make one for a Sim.
type transportKind struct {
	name, doc string
	caps      transportCaps
	new       func(h transportHost, c transportConfig) transport
}

// transportCaps is what a transport asks of the rest of the packet core,
// which asks nothing else about which transport runs.
type transportCaps struct {
	// placesOutOfOrder: receivers place a packet that arrives past a gap
	// (the Sim's placement, which per-packet routing needs under any
	// transport) instead of handing it to the transport's gap.
	placesOutOfOrder bool
	// ackEach: a receiver acknowledges every packet it places out of
	// order, not every L2_ACK_INTERVAL.
	ackEach bool
	// surrogate: the hybrid surrogate (surrogate.go) may run with it: the
	// sender keeps no per-packet state that packets skipping the fabric
	// or frozen in it would leave stale.
	surrogate bool
}

// transportConfig is what a transport reads of the configuration.
type transportConfig struct {
	payload   int64 // PACKET_PAYLOAD_SIZE
	perPacket bool  // a routing that may reorder a queue pair's packets
}

// transportHost is all a transport may do to the simulation: read the
// clock, and, for a data packet its receiver does not take, count it as
// discarded or turn it into an acknowledgement. The queue pair it is
// handed (qp) is its own to update.
type transportHost interface {
	now() int64
	discard(pi int32)                      // pi's payload was thrown away by its receiver
	reply(pi int32, kind uint8, seq int64) // pi becomes an ACK or NACK of seq, echoing its ECN mark
}

// transport is a NIC's loss recovery: what a sender resends before new
// data, what of its window has left the network, how it reacts to an
// acknowledgement and to a timeout, and what a receiver does with a
// packet past a gap it does not place. The Sim keeps the queue pairs,
// their windows, pacing and congestion control, and the receivers'
// placement of out-of-order packets.
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
	// gap handles data packet pi arriving past receiver q's next byte when
	// it is not placed; true when pi became a control frame.
	gap(pi int32, q *qp) bool
	tag(pkt *packet) // marks a data packet turning into its acknowledgement
}

func (t Transport) String() string { return transports[t].name }

// PlacesOutOfOrder is whether receivers keep packets that arrive past a
// gap under this transport (go-back-N's discard them).
func (t Transport) PlacesOutOfOrder() bool { return transports[t].caps.placesOutOfOrder }

func (t Transport) caps() transportCaps { return transports[t].caps }

func transportNames() []string {
	n := make([]string, len(transports))
	for i, k := range transports {
		n[i] = k.name
	}
	return n
}

// transportDoc is the TRANSPORT key's documentation, from the kinds'.
func transportDoc() string {
	d := make([]string, len(transports))
	for i, k := range transports {
		d[i] = k.doc
	}
	return "fabricsim: " + strings.Join(d, ", or ")
}

// ParseTransport reads a TRANSPORT value.
func ParseTransport(s string) (Transport, error) { return parseEnum[Transport](s, transportNames()) }

// registerTransport adds a transport after the built-in ones (tests).
func registerTransport(k transportKind) Transport {
	transports = append(transports, k)
	return Transport(len(transports) - 1)
}

// tpHost is a Sim as its transport sees it.
type tpHost struct{ s *Sim }

func (h tpHost) now() int64 { return h.s.now }

func (h tpHost) discard(pi int32) { h.s.stats.Discarded += int64(h.s.pkts[pi].size) }

func (h tpHost) reply(pi int32, kind uint8, seq int64) {
	h.s.nic.sendCtl(pi, kind, seq, h.s.pkts[pi].ecn)
}

func newTransport(s *Sim) transport {
	return transports[s.cfg.Transport].new(tpHost{s}, transportConfig{payload: int64(s.cfg.PayloadSize), perPacket: s.fab.fwding.perPacket()})
}
