// Package cc holds the congestion-control algorithms of the packet-level
// backend behind one interface: DCQCN (SimAI's default), and the others
// SimAI's RDMA stack offers. The simulator owns the event loop; an
// algorithm reacts to acknowledgements and to its own timer, and tells the
// sender its pacing rate and window through State.
package cc

import "unsafe"

// IntHop is one switch's in-band telemetry record (HPCC): the egress port's
// cumulative transmitted bytes and queue length at the time the packet left.
type IntHop struct {
	TimePs   int64
	TxBytes  int64
	QLen     int64   // bytes
	LineRate float64 // bit/s
}

// MaxHops bounds the INT records a packet carries (SimAI: IntHeader::maxHop).
const MaxHops = 5

// Feedback is what one ACK (or NACK) tells the sender.
type Feedback struct {
	Now    int64 // ps
	Acked  int64 // bytes newly acknowledged
	AckSeq int64 // cumulative acknowledged byte offset
	SndNxt int64 // next byte the sender will send
	ECN    bool  // the receiver echoed congestion (a CNP for DCQCN); cleared by OnFeedback if the algorithm discards the echo (DCQCN's MinCNPInterval), so that callers count CNPs acted on
	RTT    int64 // ps, from the echoed send time; 0 if unknown
	NHops  int
	Hops   [MaxHops]IntHop
	// Prev is the queue pair's INT history, which HPCC and HPCC-PINT
	// (UsesINT) read and update; the caller keeps one per queue pair,
	// zeroed when the pair starts, and must set it for them. Kept out of
	// State: it is 168 bytes that the other algorithms' queue pairs, 16.8 M
	// of them in a 4096-GPU AllToAll, would carry for nothing.
	Prev *HopHistory
}

// HopHistory is the previous INT record of each hop of a queue pair's path.
type HopHistory struct {
	Hops [MaxHops]IntHop
	N    int // records kept
}

// State is a queue pair's congestion state. The simulator sets LineRate,
// BaseRTT, BaseWin and Seed and reads Rate (pacing, bit/s); its window is
// BaseWin, scaled by Rate/LineRate under VAR_WIN.
//
// Each algorithm keeps its own state type (dcqcnState, hpccState, ...)
// in priv, so no field means one thing to one algorithm and another to the
// next, while a queue pair's whole state stays in one struct, in the cache
// lines the simulator reads anyway (a table per algorithm would cost a
// cache miss per ACK at scale).
type State struct {
	LineRate float64 // bit/s
	Rate     float64 // bit/s
	BaseRTT  int64   // ps
	BaseWin  int64   // bytes: the bandwidth-delay product window
	// Seed starts the queue pair's random stream, for algorithms that draw
	// (HPCC-PINT), so runs are deterministic and pairs do not share one.
	Seed uint64

	priv [privWords]uint64
}

// privWords bounds an algorithm's state type: 9 words, DCQCN's size. An
// algorithm's file checks its type fits at compile time.
const privWords = 9

// privOf is s's private state as the algorithm's type T, which holds only
// numbers and booleans (priv is scanned by no garbage collector) and fits
// in privWords.
func privOf[T any](s *State) *T { return (*T)(unsafe.Pointer(&s.priv)) }

// Algorithm is a congestion-control algorithm. Methods return the time (ps)
// at which the algorithm wants OnTimer called next, or 0 for no timer; the
// simulator keeps one pending timer per queue pair and calls OnTimer at the
// latest returned time.
type Algorithm interface {
	Name() string
	// Init starts a queue pair at line rate.
	Init(s *State)
	OnFeedback(s *State, fb *Feedback) (wake int64)
	OnTimer(s *State, now int64) (wake int64)
	// UsesECN says whether switches should mark ECN for this algorithm;
	// UsesINT whether they should append telemetry to data packets.
	UsesECN() bool
	UsesINT() bool
}
