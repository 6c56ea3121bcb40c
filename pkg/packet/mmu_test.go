package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// The MMU by hand, on one switch between two GPUs over 100 Gbps, 1 µs
// links, with 1000-byte packets (no header): a queue's reserve is 4096 B;
// each link into the switch sets aside 8 x 4096 B of reserves and
// 3 x 12500 B + 2 x 1000 B = 39,500 B of headroom; the buffer is that
// plus 90,000 B of shared pool, so a queue's dynamic threshold is
// (90,000 - shared in use) / 8.
func TestMMUByHand(t *testing.T) {
	tp := &stream.Topology{GPUs: 2, Nodes: []stream.Node{{ID: 0, Kind: stream.NodeGPU}, {ID: 1, Kind: stream.NodeSwitch}, {ID: 2, Kind: stream.NodeGPU}},
		Links: []stream.Link{{A: 0, B: 1, BWbps: 100e9, LatencyPs: 1e6, Kind: stream.LinkNIC}, {A: 1, B: 2, BWbps: 100e9, LatencyPs: 1e6, Kind: stream.LinkNIC}}}
	cfg := DefaultConfig()
	cfg.PayloadSize, cfg.HeaderBytes = 1000, 0
	cfg.BufferBytes = 2*(8*4096+39_500) + 90_000
	m, short, _ := newMMU(tp, &cfg)
	if short != 0 || m.reserve != 4096 || m.headroom[0] != 39_500 || m.rsrvHdrm[1] != 2*(8*4096+39_500) {
		t.Fatalf("reserve %d, headroom %d, set aside %d, %d switches short", m.reserve, m.headroom[0], m.rsrvHdrm[1], short)
	}
	const v, dl, q = 1, 0, dataQ
	// Packets 1-4 fill the reserve, 5-14 the shared pool (9,904 B, under
	// the threshold (90,000 - 9,904) / 8 = 10,012); packet 15 would take
	// 10,904 B, over 10,012: it goes to headroom and pauses the sender.
	paused := false // the PFC's state, which it keeps
	for i := 1; i <= 15; i++ {
		ok, pause := m.admit(v, dl, q, 1000, paused)
		if !ok || pause != (i == 15) {
			t.Fatalf("packet %d: admitted %v, pause %v", i, ok, pause)
		}
		paused = paused || pause
	}
	if _, pause := m.admit(v, dl, q, 0, paused); pause {
		t.Fatal("a paused sender paused again")
	}
	if k := dl*nQ + q; m.hdrmBytes[k] != 1000 || m.ingBytes[k] != 14_000 || m.shared[v] != 9_904 {
		t.Fatalf("headroom %d, queue %d, shared %d", m.hdrmBytes[k], m.ingBytes[k], m.shared[v])
	}
	// Draining: the headroom packet first, then shared bytes until in use
	// + 3,072 B of resume offset fits the threshold: 9,904 B in use
	// (12,976 > 10,012), 8,904 (11,976 > 10,137), 7,904 (10,976 >
	// 10,262), 6,904 (9,976 <= 10,387): the 4th departure resumes.
	for i := 1; i <= 4; i++ {
		if resume := m.release(v, dl, q, 1000, paused); resume != (i == 4) {
			t.Fatalf("departure %d: resume %v", i, resume)
		}
	}

	// Static thresholds: the share stays 90,000 / 8 = 11,250 B whatever is
	// in use, so the 15th packet (10,904 B) still fits and the 16th
	// (11,904 B) goes to headroom and pauses.
	cfg.DynamicPFC = false
	m, _, _ = newMMU(tp, &cfg)
	for i := 1; i <= 16; i++ {
		if ok, pause := m.admit(v, dl, q, 1000, false); !ok || pause != (i == 16) {
			t.Fatalf("static threshold, packet %d: admitted %v, pause %v", i, ok, pause)
		}
	}
	cfg.DynamicPFC = true

	// Lossy, the 15th packet has no headroom to go to: it is dropped.
	cfg.EnablePFC = false
	cfg.BufferBytes = 2*(8*4096) + 90_000 // no headroom set aside without PFC
	m, _, _ = newMMU(tp, &cfg)
	for i := 1; i <= 15; i++ {
		if ok, pause := m.admit(v, dl, q, 1000, false); ok != (i < 15) || pause {
			t.Fatalf("lossy packet %d: admitted %v, pause %v", i, ok, pause)
		}
	}

	// Port PFC: high mark 15 packets, low 12; pause above, resume below.
	cfg.EnablePFC, cfg.PortPFC = true, true
	m, _, _ = newMMU(tp, &cfg)
	f := newPFC(nil, &cfg, 2*len(tp.Links))
	for i := 1; i <= 16; i++ {
		if ok, pause := f.admitPort(m, v, dl, 1000); !ok || pause != (i == 16) {
			t.Fatalf("port packet %d: admitted %v, pause %v", i, ok, pause)
		}
	}
	for i := 1; i <= 5; i++ { // 15,000 ... 11,000 B left
		if resume := f.releasePort(m, v, dl, 1000); resume != (i == 5) {
			t.Fatalf("port departure %d: resume %v", i, resume)
		}
	}
}
