package packet

import "testing"

// A PAUSE kept at its port (not in the calendar) applies exactly when its
// event would have popped: not to an event before it in (time, number)
// order, to every one after; several apply in the order sent, the last
// setting the expiry; a RESUME event between two settles the first only.
func TestLazyPauseAppliesInEventOrder(t *testing.T) {
	s := &Sim{cfg: Config{PauseTimePs: 5000}}
	f := &pfc{s: s}
	p := &port{}
	p.lzs[0] = lzFrame{at: 100, seq: 7, q: dataQ}
	p.lzs[1] = lzFrame{at: 300, seq: 2, q: dataQ}
	p.lz = 2
	f.settleAt(p, 100, 7) // the same event: not before itself
	if p.paused[dataQ] || p.lz != 2 {
		t.Fatalf("applied at its own event: paused %v, %d waiting", p.paused[dataQ], p.lz)
	}
	f.settleAt(p, 100, 8)
	if !p.paused[dataQ] || p.pauseTill[dataQ] != 100+5000 || p.lz != 1 || p.lzs[0].at != 300 {
		t.Fatalf("after the first: paused %v till %d, %d waiting", p.paused[dataQ], p.pauseTill[dataQ], p.lz)
	}
	p.paused[dataQ] = false // a RESUME event at 200 (frame settles, then resumes)
	if p.pausedNow(dataQ, 250, false) {
		t.Fatal("paused between the RESUME and the second PAUSE")
	}
	f.settleAt(p, 300, 3)
	if !p.paused[dataQ] || p.pauseTill[dataQ] != 300+5000 || p.lz != 0 {
		t.Fatalf("after the second: paused %v till %d, %d waiting", p.paused[dataQ], p.pauseTill[dataQ], p.lz)
	}
	p.lzs[0] = lzFrame{at: 400, seq: 1, q: portPFC}
	p.lz = 1
	f.settleAt(p, 401, 0)
	for q := 1; q < nQ; q++ {
		if !p.paused[q] || p.pauseTill[q] != maxTime {
			t.Fatalf("port PAUSE: queue %d paused %v till %d", q, p.paused[q], p.pauseTill[q])
		}
	}
}
