package packet

import (
	"math/bits"
	"math/rand/v2"
)

// The egress scheduler of every port: eight priority FIFOs of packet
// indexes, the PAUSE state the downstream node sets, round robin over the
// data priorities, and RED/ECN marking. The Sim decides when a port
// transmits (tryTx) and what the packet does next; the port decides which
// queue goes and whether a packet is marked.

// fifo is a queue of packet indexes.
type fifo struct {
	buf  []int32
	head int
}

func (f *fifo) len() int { return len(f.buf) - f.head }
func (f *fifo) push(p int32) {
	if f.head > 0 && f.head == len(f.buf) {
		f.buf, f.head = f.buf[:0], 0
	}
	f.buf = append(f.buf, p)
}
func (f *fifo) pop() int32 {
	p := f.buf[f.head]
	f.head++
	if f.head >= 4096 && f.head*2 >= len(f.buf) {
		n := copy(f.buf, f.buf[f.head:])
		f.buf, f.head = f.buf[:n], 0
	}
	return p
}

// port is the egress of one directed link: eight priority FIFOs, PAUSE
// state set by the downstream node, and, at endpoints, the queue pairs that
// send through it.
//
// A port is ten whole cache lines, laid out by who reads them: the first
// two hold what every packet's hop reads (link, serialisation, the queue
// pairs' list, RED's thresholds, paused flags), the PAUSE state goes on
// adjacent lines from the second (what a refresh, a waiting PAUSE applied
// and a kept wake read, pfc.go and pfcwake.go: a 127-to-1 incast's run
// missed the first-level cache 20.1 M times with that state scattered
// over a port of 624 bytes, 16.9 M so), and the queues' bytes and FIFOs
// come last. A data packet's hop through a switch touches four of its
// lines and the FIFO's array, where it touched five or six: SimAI's micro
// AllReduce's first 1 ms missed the first-level cache 38.25 M times with
// this order and the loop's read-ahead threshold together (sim.go), 41.3
// M before; the 127-to-1 incast in 1 MB buffers 15.7 M, 15.9 M before.
type port struct {
	// Line 0.
	down      bool
	marks     bool // RED/ECN marking on this port
	inINT     bool
	qpTurn    bool  // alternate forwarded data and local QPs
	rr        uint8 // last data queue served
	full      uint8 // bit q: queue q is not empty
	lz        uint8 // how many PAUSEs wait to be applied (lzs, pfc.go)
	lzHead    uint8 // the oldest's index in lzs, a ring
	from, to  int32
	bitPs     float64 // ps per byte
	lat       int64
	busyUntil int64 // serializing until then
	txDoneAt  int64 // time of the scheduled evTxDone, 0 when none
	lossProb  float64
	txBytes   int64
	// Line 1.
	qps    []int32
	qpRR   int
	kmin   int64
	kmax   int64
	paused [nQ]bool
	wakeAt int64
	// Lines 2-4: the rest of the PAUSE state, the waiting PAUSEs first,
	// so that queue 3's deadline shares their last line.
	lzs       [lzCap]lzFrame // the PAUSEs on their way here, oldest first from lzHead
	pauseTill [nQ]int64
	pmax      float64
	bw        float64
	_         [16]byte // to 640 bytes, ten cache lines (TestPortIsWholeCacheLines)
	// Lines 5-9.
	qBytes [nQ]int64
	q      [nQ]fifo
}

func (p *port) push(q uint8, pi int32) {
	p.q[q].push(pi)
	p.full |= 1 << q
}

func (p *port) pop(q int) int32 {
	pi := p.q[q].pop()
	if p.q[q].len() == 0 {
		p.full &^= 1 << q
	}
	return pi
}

// nextQueue picks the data queue (1..7) to serve next, round robin over
// the non-empty, unpaused ones; 0 when none can send.
func (p *port) nextQueue(now int64, hostFree bool) int {
	m := uint(p.full) &^ 1
	if m == 0 {
		return 0
	}
	// The queues after rr (0..6) first, rr+1..7, then 1..rr: the set bits
	// of full in that order (a step per queue, 7 a call, was 2% of a
	// packet run's instructions where one queue carries the data).
	after := uint(1)<<(p.rr+1) - 1
	for _, c := range [2]uint{m &^ after, m & after} {
		for ; c != 0; c &= c - 1 {
			if i := bits.TrailingZeros(c); !p.pausedNow(i, now, hostFree) {
				p.rr = uint8(i % (nQ - 1))
				return i
			}
		}
	}
	return 0
}

// red is SimAI's ShouldSendCN: mark above kmax, never below kmin, linearly
// in between up to pmax.
func (p *port) red(qlen int64, rng *rand.PCG) bool {
	switch {
	case qlen > p.kmax:
		return true
	case qlen > p.kmin:
		return unit(rng) < p.pmax*float64(qlen-p.kmin)/float64(p.kmax-p.kmin)
	}
	return false
}

// unit is a uniform draw from [0, 1), as rand.Rand's Float64 makes it.
func unit(r *rand.PCG) float64 { return float64(r.Uint64()<<11>>11) / (1 << 53) }
