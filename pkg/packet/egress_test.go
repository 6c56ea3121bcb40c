package packet

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/fabricsim/fabricsim/pkg/route"
)

// The egress scheduler serves the non-empty data queues in turn (1, 2, 3,
// 1, ...), skips a paused one until its PAUSE expires, and never returns
// the control queue 0, which tryTx serves first on its own.
func TestEgressRoundRobin(t *testing.T) {
	var p port
	for q := uint8(1); q <= 3; q++ {
		for k := 0; k < 10; k++ {
			p.push(q, int32(q)*100+int32(k))
		}
	}
	p.push(0, 7)
	serve := func(now int64, n int) []int {
		var got []int
		for range n {
			q := p.nextQueue(now, false)
			got = append(got, q)
			if q > 0 {
				p.pop(q)
			}
		}
		return got
	}
	if got := serve(0, 6); !slices.Equal(got, []int{1, 2, 3, 1, 2, 3}) {
		t.Errorf("served %v, want 1 2 3 1 2 3", got)
	}
	p.paused[2], p.pauseTill[2] = true, 100
	if got := serve(50, 4); !slices.Equal(got, []int{1, 3, 1, 3}) {
		t.Errorf("queue 2 paused until 100: served %v at 50, want 1 3 1 3", got)
	}
	p.rr = 1 // queue 2 is next in turn
	if p.nextQueue(50, true) != 2 {
		t.Errorf("a host port under a suspended fabric is not held by PAUSE")
	}
	p.rr = 1 // queue 2 is next in turn
	if got := serve(100, 1); got[0] != 2 || p.paused[2] {
		t.Errorf("at 100 the PAUSE has expired: served %v, paused %v", got, p.paused[2])
	}
	for p.full&^1 != 0 {
		p.pop(p.nextQueue(100, false))
	}
	if q := p.nextQueue(100, false); q != 0 || p.q[0].len() != 1 {
		t.Errorf("only the control queue holds a packet: nextQueue %d", q)
	}
}

// nextQueue picks what a walk of the queues after rr in turn (rr+1..7,
// then 1..rr) picks: the first non-empty one not held by PAUSE, expiring
// the PAUSEs it looks at on its way and no others.
func TestEgressNextQueueWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 6))
	for trial := 0; trial < 20000; trial++ {
		var p port
		p.full, p.rr = uint8(rng.UintN(256)), uint8(rng.UintN(nQ-1))
		for q := range nQ {
			p.paused[q], p.pauseTill[q] = rng.IntN(3) == 0, int64(rng.IntN(100))
		}
		now, hostFree := int64(rng.IntN(100)), rng.IntN(8) == 0
		want := p
		wq := 0
		for k, i := 0, int(want.rr); k < nQ-1; k++ {
			if i++; i == nQ {
				i = 1
			}
			if want.full&(1<<i) == 0 {
				continue
			}
			if want.paused[i] && !hostFree && now < want.pauseTill[i] {
				continue
			}
			if want.paused[i] && !hostFree {
				want.paused[i] = false // looked at, expired
			}
			wq, want.rr = i, uint8(i%(nQ-1))
			break
		}
		if q := p.nextQueue(now, hostFree); q != wq || p.rr != want.rr || p.paused != want.paused {
			t.Fatalf("full %08b rr %d paused %v till %v now %d hostFree %v: got queue %d rr %d paused %v, want %d %d %v",
				want.full, want.rr, want.paused, want.pauseTill, now, hostFree, q, p.rr, p.paused, wq, want.rr, want.paused)
		}
	}
}

// RED as SimAI's ShouldSendCN: never at or below kmin, always above kmax,
// and in between with probability pmax (q - kmin) / (kmax - kmin).
func TestRED(t *testing.T) {
	p := port{kmin: 100_000, kmax: 400_000, pmax: 0.2}
	var rng rand.PCG
	rng.Seed(1, 2)
	for _, c := range []struct {
		qlen int64
		want float64
	}{{0, 0}, {100_000, 0}, {250_000, 0.1}, {400_000, 0.2}, {400_001, 1}} {
		const n = 200_000
		marked := 0
		for range n {
			if p.red(c.qlen, &rng) {
				marked++
			}
		}
		// 5 standard deviations of a binomial share.
		if got, tol := float64(marked)/n, 5*math.Sqrt(c.want*(1-c.want)/n); math.Abs(got-c.want) > tol {
			t.Errorf("queue %d B: marked %.4f, want %.4f", c.qlen, got, c.want)
		}
	}
}

// Adaptive routing takes the egress with the fewest bytes queued at the
// packet's priority plus what is still on the wire, a paused one only if
// every egress is paused, and an expired PAUSE does not count.
func TestAdaptiveChoice(t *testing.T) {
	f := forwarding{mode: RouteAdaptive}
	c := []route.DirLink{0, 1, 2}
	ports := make([]port, 3)
	for i := range ports {
		ports[i].bitPs = 20 // 400 Gbit/s
	}
	pkt := &packet{q: 3}
	ports[0].qBytes[3], ports[1].qBytes[3], ports[2].qBytes[3] = 5000, 1000, 3000
	ports[1].qBytes[4] = 1 << 30 // another priority's queue is not this packet's
	for h := uint64(0); h < 8; h++ {
		if got := f.choose(c, h, pkt, 7, ports, 0); got != 1 {
			t.Fatalf("hash %d: chose %d, want the least loaded, 1", h, got)
		}
	}
	ports[1].busyUntil = 100_000 // 5000 bytes still on the wire at 0
	if got := f.choose(c, 0, pkt, 7, ports, 0); got != 2 {
		t.Errorf("with 1000 B queued and 5000 B on the wire, 1 is no longer least: chose %d", got)
	}
	ports[2].paused[3], ports[2].pauseTill[3] = true, 50
	if got := f.choose(c, 0, pkt, 7, ports, 10); got != 0 {
		t.Errorf("2 paused at 10: chose %d, want 0", got)
	}
	if got := f.choose(c, 0, pkt, 7, ports, 50); got != 2 {
		t.Errorf("2's PAUSE expired at 50: chose %d, want 2", got)
	}
	for i := range ports {
		ports[i].paused[3], ports[i].pauseTill[3] = true, 1000
	}
	if got := f.choose(c, 0, pkt, 7, ports, 10); got != c[route.Pick(0, 7, 3)] {
		t.Errorf("all paused: chose %d, want the hashed one", got)
	}
}

// A flowlet ends after an idle gap longer than FLOWLET_GAP_US; a gap of
// exactly the threshold keeps it.
func TestFlowletGap(t *testing.T) {
	f := forwarding{mode: RouteFlowlet, gapPs: 5000}
	f.addQP()
	f.addQP()
	var got []uint16
	for _, now := range []int64{0, 100, 5100, 10101, 10200} {
		got = append(got, f.sent(1, now))
	}
	if !slices.Equal(got, []uint16{0, 0, 0, 1, 1}) || f.sent(0, 20000) != 1 {
		t.Errorf("flowlets %v, want 0 0 0 1 1 (and queue pair 0 its own)", got)
	}
}

// Spraying spreads a queue pair's packets over every egress, and a
// retransmission (the same sequence number) repeats its original's.
func TestSprayChoice(t *testing.T) {
	f := forwarding{mode: RouteSpray}
	c := []route.DirLink{10, 11, 12, 13}
	count := map[route.DirLink]int{}
	for seq := int64(0); seq < 4000; seq++ {
		pkt := &packet{seq: seq * 9000}
		d := f.choose(c, 42, pkt, 3, nil, 0)
		if again := f.choose(c, 42, &packet{seq: seq * 9000}, 3, nil, 0); again != d {
			t.Fatalf("seq %d: %d, then %d on retransmission", seq, d, again)
		}
		count[d]++
	}
	for _, d := range c {
		if count[d] < 800 || count[d] > 1200 {
			t.Errorf("egress %d took %d of 4000 packets", d, count[d])
		}
	}
}

// A port is whole cache lines (egress.go), so that in a large array (page
// aligned) each starts on a line and its fields fall on the same lines in
// every port: a field added must take the padding's room.
func TestPortIsWholeCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(port{}); n%64 != 0 {
		t.Fatalf("a port is %d bytes, %d past a cache line", n, n%64)
	}
}
