package packet

import (
	"math"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// One cross-rail flow on a Spectrum-X cluster whose 4 spines hang off each
// leaf by 100 Gbit/s links behind a 400 Gbit/s NIC. ECMP pins it to one
// spine: it moves at 100 Gbit/s (PFC holds the NIC back). Spraying and
// adaptive routing spread its packets over the 4 spines: 400 Gbit/s, the
// NIC's rate, with packets arriving out of order and every byte placed
// once; random spraying needs slack for that (its per-spine loads
// fluctuate, and with none PFC stalls the NIC: 82% of 400 Gbit/s), so it
// is measured behind a 200 Gbit/s NIC. Flowlets do not help a flow that
// never pauses (one path), unless the gap is shorter than a packet's
// serialization: then every packet is a flowlet, and it sprays.
func TestRoutingOneFlowOverFourSpines(t *testing.T) {
	const size = 8 << 20
	wire := func(bw float64) float64 { // ps to serialize the flow's packets at bw
		cfg := DefaultConfig()
		pkts := math.Ceil(float64(size) / float64(cfg.PayloadSize))
		return (float64(size) + pkts*float64(cfg.HeaderBytes)) * 8e12 / bw
	}
	for _, c := range []struct {
		routing   Routing
		nic, want float64
		ooo       bool
		gapPs     int64
	}{
		{RouteECMP, 400e9, 100e9, false, 0},
		{RouteFlowlet, 400e9, 100e9, false, 0},
		{RouteAdaptive, 400e9, 400e9, true, 0},
		{RouteSpray, 200e9, 200e9, true, 0},
		{RouteECMP, 200e9, 100e9, false, 0},
		{RouteFlowlet, 200e9, 200e9, true, 1000},
	} {
		t.Run(c.routing.String(), func(t *testing.T) {
			tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: c.nic, SwitchBW: 100e9, PSWs: 4})
			cfg := DefaultConfig()
			cfg.CCMode = 0
			cfg.Routing = c.routing
			if c.gapPs > 0 {
				cfg.FlowletGapPs = c.gapPs
			}
			// GPU 0 (server 0, rail 0) to GPU 9 (server 1, rail 1): the
			// rails' leaves meet only at the spines.
			s, fl := runFlows(t, tp, cfg, cc.ModeNone, []flowSpec{{src: 0, dst: 9, size: size}})
			fct := float64(fl.End[0])
			want := wire(c.want)
			if math.Abs(fct-want) > 0.05*want {
				t.Fatalf("FCT %.1f us, want %.1f us (%g Gbit/s) within 5%%", fct/1e6, want/1e6, c.want/1e9)
			}
			// GPU 0's leaf sends all of the data up one of its 4 uplinks
			// under ECMP (max/mean 4), a quarter on each when spread;
			// GPU 9's leaf sends the ACKs up one of its own (4) always.
			worst, mean, leaves := s.UplinkImbalance()
			spread := c.want > 100e9
			if leaves != 2 || worst != 4 || spread && mean > (1.15+4)/2 || !spread && mean != 4 {
				t.Fatalf("%d leaves sent up, max/mean per leaf: worst %.3f, mean %.3f", leaves, worst, mean)
			}
			if (s.Stats().Reordered > 0) != c.ooo || s.Stats().Discarded != 0 || s.Stats().Retransmitted != 0 {
				t.Fatalf("reordered %d packets, discarded %d B, retransmitted %d B; want reordering %v and no waste",
					s.Stats().Reordered, s.Stats().Discarded, s.Stats().Retransmitted, c.ooo)
			}
		})
	}
}

// Every ROUTING value parses, anything else is refused by name, and the
// flowlet gap is bounded.
func TestRoutingConfig(t *testing.T) {
	for _, name := range []string{"ecmp", "spray", "flowlet", "adaptive"} {
		c := DefaultConfig()
		if err := c.SetKV("ROUTING=" + name); err != nil || c.Routing.String() != name {
			t.Fatalf("ROUTING=%s: %v (got %s)", name, err, c.Routing)
		}
	}
	c := DefaultConfig()
	for _, bad := range []string{"ROUTING=valiant", "ROUTING=", "FLOWLET_GAP_US=0", "FLOWLET_GAP_US=-1", "FLOWLET_GAP_US=NaN"} {
		if err := c.SetKV(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if err := c.SetKV("FLOWLET_GAP_US=2.5"); err != nil || c.FlowletGapPs != 2_500_000 {
		t.Fatalf("FLOWLET_GAP_US=2.5: %v, %d ps", err, c.FlowletGapPs)
	}
}

// Under per-packet routing a receiver never NACKs (reordering is normal),
// so a loss is repaired by the sender's timeout going back to its first
// unacknowledged byte: on lossy links every byte still arrives, once, and
// what was resent after being placed is counted as discarded.
func TestRoutingRepairsLossByTimeout(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 200e9, SwitchBW: 100e9, PSWs: 4})
	for _, r := range []Routing{RouteSpray, RouteAdaptive} {
		cfg := DefaultConfig()
		cfg.Routing = r
		cfg.ErrorRate = 0.002
		cfg.RTOPs = 20_000_000 // 20 us
		s, _ := runFlows(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{src: 0, dst: 9, size: 8 << 20}, {src: 1, dst: 12, size: 4 << 20}})
		if s.Stats().Dropped == 0 || s.Stats().Retransmitted == 0 || s.Stats().Reordered == 0 {
			t.Fatalf("%s: dropped %d packets, retransmitted %d B, placed %d out of order: expected losses, repairs and reordering", r, s.Stats().Dropped, s.Stats().Retransmitted, s.Stats().Reordered)
		}
	}
}

// The surrogate learns latencies per path and resumes frozen packets on
// their queue pair's path, so it refuses per-packet routing by name.
func TestRoutingRefusesSurrogate(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	cfg := DefaultConfig()
	cfg.Routing = RouteAdaptive
	s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{src: 0, dst: 9, size: 1 << 20}})
	if err := s.SetSurrogate(Surrogate{StartPs: 1, EndPs: 2}); err == nil || !strings.Contains(err.Error(), "ROUTING ecmp") {
		t.Fatalf("surrogate with adaptive routing: %v", err)
	}
}

// A policy the packet core has no forwarder for is refused when the run is
// made, naming it, rather than indexing past the table.
func TestForwarderMissing(t *testing.T) {
	for _, p := range []Routing{RouteECMP, RouteSpray, RouteFlowlet, RouteAdaptive} {
		if err := checkForwarder(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := checkForwarder(Routing(len(forwarders))); err == nil || !strings.Contains(err.Error(), "no forwarder") {
		t.Errorf("an unregistered policy: %v", err)
	}
}
