package packet

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// A 15-to-1 incast on a k=4 fat-tree, no congestion control, under port
// PFC: nothing is lost, the sink's link runs full (the makespan is the
// bytes over its rate, within 2%), PAUSE frames are sent, and at the end
// every paused port has been resumed and every buffer is empty.
func TestPortPFCIncast(t *testing.T) {
	tp := gen(t, topo.Params{Family: "fat-tree", GPUs: 16, GPUsPerServer: 1, K: 4, NICBW: 100e9, SwitchBW: 100e9})
	cfg := DefaultConfig()
	cfg.CCMode = 0
	cfg.PortPFC = true
	const size = 2 << 20
	var specs []flowSpec
	for i := int32(1); i < 16; i++ {
		specs = append(specs, flowSpec{src: i, dst: 0, size: size})
	}
	s, fl := runFlows(t, tp, cfg, 0, specs)
	pkts := math.Ceil(float64(size) / float64(cfg.PayloadSize))
	want := 15 * (float64(size) + pkts*float64(cfg.HeaderBytes)) * 8e12 / 100e9
	if got := float64(s.Stats().SimPs); math.Abs(got-want) > 0.02*want {
		t.Fatalf("makespan %.1f us, want the sink's %.1f us within 2%%", got/1e6, want/1e6)
	}
	if s.Stats().Dropped != 0 || s.Stats().Pauses == 0 {
		t.Fatalf("%d dropped, %d PAUSE frames: want lossless, with pauses", s.Stats().Dropped, s.Stats().Pauses)
	}
	// A port stops growing once its PAUSE is in force: above the high
	// threshold by at most what a round trip of the link carries plus the
	// packets being serialized at either end.
	high, _ := cfg.portThresholds()
	pkt := int64(cfg.PayloadSize + cfg.HeaderBytes)
	var lat int64
	for _, l := range tp.Links {
		lat = max(lat, l.LatencyPs)
	}
	bound := high + 2*int64(float64(lat)*100e9/8e12) + 2*pkt
	if s.Stats().PeakIngress <= high || s.Stats().PeakIngress > bound {
		t.Fatalf("an ingress port held %d B; want above the %d B threshold (it pauses there) and at most %d B", s.Stats().PeakIngress, high, bound)
	}
	for dl, up := range s.pfc.pausedUp {
		if up || s.pfc.ing[dl] != 0 {
			t.Fatalf("ingress %d: paused %v, %d bytes left at the end", dl, up, s.pfc.ing[dl])
		}
	}
	for _, e := range fl.End {
		if e < 0 {
			t.Fatal("a flow did not finish")
		}
	}
}

// The port mode's keys are checked: an unknown mode, a low threshold not
// below the high one, and port PFC on a lossy fabric are refused.
func TestPortPFCConfig(t *testing.T) {
	c := DefaultConfig()
	for _, bad := range []string{"PFC_MODE=queue", "PFC_PORT_HIGH_KB=0", "PFC_PORT_LOW_KB=-3"} {
		if err := c.SetKV(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	tp := gen(t, topo.Params{Family: "fat-tree", GPUs: 16, GPUsPerServer: 1, K: 4})
	for _, kv := range [][]string{
		{"PFC_MODE=port", "PFC_PORT_HIGH_KB=100", "PFC_PORT_LOW_KB=100"},
		{"PFC_MODE=port", "ENABLE_PFC=0"},
	} {
		cfg := DefaultConfig()
		for _, x := range kv {
			if err := cfg.SetKV(x); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := newSimErr(t, tp, cfg, 0, []flowSpec{{src: 1, dst: 0, size: 1}}); err == nil {
			t.Errorf("%v accepted", kv)
		}
	}
	cfg := DefaultConfig()
	if hi, lo := cfg.portThresholds(); hi != 15*9048 || lo != 12*9048 {
		t.Fatalf("default thresholds %d/%d B, want htsim's 15/12 packets of 9048 B", hi, lo)
	}
}

// Port PFC on seed 003's deadlocking dragonfly (as TestPFCDeadlockDetected):
// a cycle of paused ports forms there too, and without refreshes only
// retransmission timeouts keep the clock going, and the detector looks at
// them: the run stops within a stall window, a persistence window and a
// timeout (plus a look's spacing) of the last move, names the cycle, keeps
// what finished.
func TestPortPFCDeadlockStops(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PortPFC = true
	s, _, _ := dragonflyShift8(t, cfg)
	err := s.Run()
	var inc *Incomplete
	if !errors.As(err, &inc) || !strings.Contains(err.Error(), "PFC deadlock") || !strings.Contains(err.Error(), "in a cycle switch") || inc.Done == 0 {
		t.Fatalf("Run: %v", err)
	}
	if s.Stats().SimPs > s.watch.lastMoveAny+s.watch.stallWindow()+s.watch.persistWindow()*5/4+s.cfg.RTOPs {
		t.Fatalf("stopped at %d ps, %d ps after the last move", s.Stats().SimPs, s.Stats().SimPs-s.watch.lastMoveAny)
	}
}
