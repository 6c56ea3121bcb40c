package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// ackCounter is go-back-N counting the acknowledgements its senders get.
type ackCounter struct {
	goBackN
	n *int
}

func (a ackCounter) acked(q *qp, qi int32, pkt *packet) { *a.n++; a.goBackN.acked(q, qi, pkt) }

var ackCounts int

var transportCounting = registerTransport(transportKind{name: "counting", doc: "go-back-N counting ACKs (a test)",
	new: func(h transportHost, _ transportConfig) transport { return ackCounter{goBackN{h}, &ackCounts} }})

// ACK_COALESCE N on an idle path: one ACK every N packets and one for the
// last (ceil(K/N) for K packets), and the last byte arrives when the
// closed form of TestIdlePathClosedForm says, as with an ACK a packet: the
// window has room for the packets whose ACK is held back.
func TestAckCoalesceIdlePath(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	for _, c := range []struct {
		size  int64
		every int
	}{{100 * 9000, 4}, {100 * 9000, 3}, {1 << 20, 8}, {9000, 4}, {5 * 9000, 16}} {
		cfg := DefaultConfig()
		cfg.Transport = transportCounting
		cfg.AckCoalesce = c.every
		ackCounts = 0
		_, fl := runFlows(t, tp, cfg, cc.ModeNone, []flowSpec{{0, 8, c.size, nil}})
		k := (c.size + 8999) / 9000
		if want := int((k + int64(c.every) - 1) / int64(c.every)); ackCounts != want {
			t.Errorf("%d packets, ACK_COALESCE %d: %d ACKs, want %d", k, c.every, ackCounts, want)
		}
		const psPerByte, prop = 80, 500_000
		full, last := c.size/9000, c.size%9000
		wire := full * 9048 * psPerByte
		if last > 0 {
			wire += (last + 48) * psPerByte
		}
		first := (min(c.size, 9000) + 48) * psPerByte
		if want := first + prop + wire + prop; fl.RxDone[0]-fl.Start[0] != want {
			t.Errorf("%d packets, ACK_COALESCE %d: last byte after %d ps, want %d", k, c.every, fl.RxDone[0]-fl.Start[0], want)
		}
	}
}

// Under DCQCN an incast cuts the senders' rates and VAR_WIN their windows
// below the packets an ACK is held back for: their AckReq marks keep the
// ACKs coming, and the incast ends when it does with an ACK a packet
// (within a tenth). Without them a sender whose window is full waits for
// ACKs that coalescing holds back (the incast ended a quarter later; no
// timeout fires, RTO_US is a second).
func TestAckCoalesceAckReqKeepsWindowsMoving(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.DCNSingleToR, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	var specs []flowSpec
	for i := int32(8); i < 16; i++ {
		specs = append(specs, flowSpec{i, 0, 4 << 20, nil})
	}
	cfg := DefaultConfig()
	cfg.RTOPs = 1e12
	_, exact := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	cfg.AckCoalesce = 256 // more than a 4 MiB flow's 466 packets hold in any window
	s, fl := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	var end, endExact int64
	for i := range specs {
		end, endExact = max(end, fl.End[i]), max(endExact, exact.End[i])
	}
	if end > endExact*11/10 {
		t.Fatalf("coalesced incast ended at %d ps, %d with an ACK a packet", end, endExact)
	}
	if s.Stats().CNPs == 0 {
		t.Fatal("no CNP: the incast did not cut the rates, the case tests nothing")
	}
}

// A partitioned run under ACK_COALESCE is the single loop's, flow for
// flow: the AckReq mark rides in the packet, and a receiver's count is
// its pair's (or its shadow's) in the part it is in.
func TestAckCoalescePartitionedIdentical(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	specs := crossServerAllToAll(256 << 10)
	for src := int32(16); src < 32; src += 2 { // an incast: DCQCN cuts rates and windows
		specs = append(specs, flowSpec{src, 1, 2 << 20, nil})
	}
	cfg := DefaultConfig()
	cfg.AckCoalesce = 8
	one, f0 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	s2, f2 := runParts(t, tp, cfg, cc.ModeDCQCN, specs, 3, 2)
	for i := range f0.End {
		if f2.End[i] != f0.End[i] || f2.Start[i] != f0.Start[i] {
			t.Fatalf("flow %d ran %d-%d ps in 3 parts, %d-%d ps in the single loop", i, f2.Start[i], f2.End[i], f0.Start[i], f0.End[i])
		}
	}
	a, b := s2.Stats(), one.Stats()
	a.Events, b.Events = 0, 0
	if a != b {
		t.Fatalf("stats %+v in 3 parts, single loop %+v", a, b)
	}
	if b.CNPs == 0 {
		t.Fatal("no CNP: the incast did not cut any rate")
	}
}
