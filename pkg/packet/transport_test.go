package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// One 8 MiB flow whose last hop loses 2% of the data packets (the ACKs'
// direction loses none), over eight seeds: which packets are lost, and so
// whether a retransmission is lost too and a timeout ends the flow, is one
// draw per seed, so the claims are over their sums. Go-back-N resends every
// packet after each loss: the receiver discards what it already had. SACK
// resends the lost packets (retransmitted bytes = dropped bytes + what the
// receiver discards, and that is little: a timeout's resend), and finishes
// sooner on average; with per-packet routing the reordering is seldom taken
// for loss either.
func TestSACKResendsOnlyLostPackets(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 200e9, SwitchBW: 100e9, PSWs: 4})
	const seeds = 8
	run := func(tr Transport, r Routing) (sum Stats) {
		cfg := DefaultConfig()
		cfg.Transport, cfg.Routing, cfg.CCMode = tr, r, cc.ModeDCQCN
		for seed := uint64(1); seed <= seeds; seed++ {
			first, fl := newSim(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{src: 0, dst: 9, size: 8 << 20}})
			s, err := New(tp, first.r, cfg, fl, seed)
			if err != nil {
				t.Fatal(err)
			}
			for i := range s.fab.ports {
				if s.fab.ports[i].to == 9 {
					s.fab.ports[i].lossProb = 0.02
				}
			}
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.Delivered != 8<<20 || st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
				t.Fatalf("%s/%s seed %d: delivered %d, sent %d = delivered + dropped %d + discarded %d does not hold", tr, r, seed, st.Delivered, st.SentBytes, st.DroppedBytes, st.Discarded)
			}
			if tr == TransportSACK && st.Retransmitted != st.DroppedBytes+st.Discarded {
				t.Fatalf("sack/%s seed %d: %d B retransmitted, %d B dropped, %d B discarded", r, seed, st.Retransmitted, st.DroppedBytes, st.Discarded)
			}
			sum.Dropped += st.Dropped
			sum.DroppedBytes += st.DroppedBytes
			sum.Discarded += st.Discarded
			sum.Retransmitted += st.Retransmitted
			sum.SimPs += st.SimPs
		}
		return sum
	}
	gbn := run(TransportRoCE, RouteECMP)
	if gbn.Dropped == 0 || gbn.Discarded < 2*gbn.DroppedBytes {
		t.Fatalf("go-back-N: %d dropped (%d B), %d B discarded: expected every loss to resend packets the receiver had", gbn.Dropped, gbn.DroppedBytes, gbn.Discarded)
	}
	for _, r := range []Routing{RouteECMP, RouteSpray} {
		st := run(TransportSACK, r)
		t.Logf("sack/%s: %d dropped (%d B), %d B discarded, mean %d ps; go-back-N %d B discarded, mean %d ps", r, st.Dropped, st.DroppedBytes, st.Discarded, st.SimPs/seeds, gbn.Discarded, gbn.SimPs/seeds)
		// Under spraying a packet overtaken by three others is taken for
		// lost now and then: a few spurious resends, not a window's worth.
		spurious := st.DroppedBytes / 10
		if r == RouteSpray {
			spurious = st.DroppedBytes
		}
		if st.Dropped == 0 || st.Discarded > spurious {
			t.Fatalf("sack/%s: %d dropped (%d B), %d B discarded; want at most %d B resent beyond the lost bytes", r, st.Dropped, st.DroppedBytes, st.Discarded, spurious)
		}
		if st.Discarded*4 > gbn.Discarded {
			t.Fatalf("sack/%s discarded %d B, go-back-N %d B", r, st.Discarded, gbn.Discarded)
		}
		if st.SimPs >= gbn.SimPs {
			t.Fatalf("sack/%s took %d ps on average, go-back-N %d ps", r, st.SimPs/seeds, gbn.SimPs/seeds)
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

// nullTransport recovers nothing: a transport for a lossless fabric,
// registered here, in the test, as any new transport is registered in
// transports. It counts the pairs it is told of, to show the Sim drives
// it through the interface alone.
type nullTransport struct {
	h                    transportHost
	opened, closed, acks *int
}

func (nullTransport) addQP()                          {}
func (t nullTransport) open(int32)                    { *t.opened++ }
func (t nullTransport) close(int32)                   { *t.closed++ }
func (nullTransport) retransmit(*qp, int32) int64     { return -1 }
func (nullTransport) sackedBytes(int32) int64         { return 0 }
func (nullTransport) resent(*qp, int32, int64, int64) {}
func (t nullTransport) acked(*qp, int32, *packet)     { *t.acks++ }
func (nullTransport) timeout(*qp, int32)              {}
func (nullTransport) tag(*packet)                     {}
func (t nullTransport) gap(pi int32, _ *qp) bool      { t.h.discard(pi); return false }

var nullOpened, nullClosed, nullAcks int

var transportNull = registerTransport(transportKind{name: "null", doc: "no loss recovery (a test)",
	new: func(h transportHost, _ transportConfig) transport {
		return nullTransport{h, &nullOpened, &nullClosed, &nullAcks}
	}})

// A transport registered outside the package's files runs a small
// incast (four senders to one GPU, with PFC pauses) to the end, as
// go-back-N does on this lossless fabric: same delivery, same time.
func TestTransportRegistered(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	specs := []flowSpec{{src: 0, dst: 9, size: 2 << 20}, {src: 1, dst: 9, size: 2 << 20}, {src: 2, dst: 9, size: 2 << 20}, {src: 8, dst: 9, size: 1 << 20}}
	run := func(tr Transport) Stats {
		cfg := DefaultConfig()
		cfg.Transport = tr
		s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
		if err := s.Run(); err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		return s.Stats()
	}
	want, got := run(TransportRoCE), run(transportNull)
	if got.Delivered != 7<<20 || got != want {
		t.Fatalf("null transport: %+v; go-back-N: %+v", got, want)
	}
	if nullOpened != len(specs) || nullClosed != len(specs) || nullAcks == 0 {
		t.Fatalf("null transport told of %d opened and %d closed pairs, %d acknowledgements; want %d, %d, some", nullOpened, nullClosed, nullAcks, len(specs), len(specs))
	}
	if transportNull.String() != "null" || transportNull.PlacesOutOfOrder() {
		t.Fatalf("registered as %q", transportNull)
	}
}
