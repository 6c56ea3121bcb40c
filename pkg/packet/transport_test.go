package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// One 8 MiB flow whose last hop loses 2% of the data packets (the ACKs'
// direction loses none). Go-back-N resends every packet after each loss:
// the receiver discards what it already had. SACK resends exactly the lost
// packets (retransmitted bytes = dropped bytes, nothing discarded) and
// finishes sooner; with per-packet routing the reordering is not taken
// for loss either.
func TestSACKResendsOnlyLostPackets(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 200e9, SwitchBW: 100e9, PSWs: 4})
	run := func(tr Transport, r Routing) *Sim {
		cfg := DefaultConfig()
		cfg.Transport, cfg.Routing = tr, r
		s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{src: 0, dst: 9, size: 8 << 20}})
		for i := range s.ports {
			if s.ports[i].to == 9 {
				s.ports[i].lossProb = 0.02
			}
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats; st.Delivered != 8<<20 || st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
			t.Fatalf("%s/%s: delivered %d, sent %d = delivered + dropped %d + discarded %d does not hold", tr, r, st.Delivered, st.SentBytes, st.DroppedBytes, st.Discarded)
		}
		return s
	}
	gbn := run(TransportRoCE, RouteECMP)
	if gbn.Stats.Dropped == 0 || gbn.Stats.Discarded == 0 {
		t.Fatalf("go-back-N: %d dropped, %d B discarded: expected losses and resent packets the receiver had", gbn.Stats.Dropped, gbn.Stats.Discarded)
	}
	for _, r := range []Routing{RouteECMP, RouteSpray} {
		sack := run(TransportSACK, r)
		st := sack.Stats
		// Under spraying a packet overtaken by three others is taken for
		// lost now and then: a few spurious resends, not a window's worth.
		spurious := int64(0)
		if r == RouteSpray {
			spurious = st.DroppedBytes / 2
		}
		if st.Dropped == 0 || st.Discarded > spurious || st.Retransmitted != st.DroppedBytes+st.Discarded {
			t.Fatalf("sack/%s: %d dropped (%d B), %d B retransmitted, %d B discarded; want the lost bytes resent (and at most %d B more)", r, st.Dropped, st.DroppedBytes, st.Retransmitted, st.Discarded, spurious)
		}
		if st.Discarded*4 > gbn.Stats.Discarded {
			t.Fatalf("sack/%s discarded %d B, go-back-N %d B", r, st.Discarded, gbn.Stats.Discarded)
		}
		if st.SimPs >= gbn.Stats.SimPs {
			t.Fatalf("sack/%s took %d ps, go-back-N %d ps", r, st.SimPs, gbn.Stats.SimPs)
		}
	}
}

// TRANSPORT parses its two values and refuses others; the surrogate refuses sack.
func TestTransportConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKV("TRANSPORT=sack"); err != nil || c.Transport != TransportSACK {
		t.Fatalf("TRANSPORT=sack: %v", err)
	}
	if err := c.SetKV("TRANSPORT=irn"); err == nil {
		t.Fatal("TRANSPORT=irn accepted")
	}
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	s, _ := newSim(t, tp, c, cc.ModeDCQCN, []flowSpec{{src: 0, dst: 9, size: 1 << 20}})
	if err := s.SetSurrogate(Surrogate{StartPs: 1, EndPs: 2}); err == nil {
		t.Fatal("surrogate with TRANSPORT sack accepted")
	}
}
