package packet

import (
	"errors"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Seed 003's 72-node dragonfly with a shift-8 permutation of 16 MiB flows
// and 2 MB switch buffers deadlocks on PFC: a cycle of paused ports, no
// data moving, PAUSE frames refreshed for ever (formerly until
// SIMULATOR_STOP_TIME, or without end). The run stops about 1 ms after
// the last packet moved, names the cycle, and keeps what finished.
func TestPFCDeadlockDetected(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StopPs = 20e9 // 20 ms
	s, fl, specs := dragonflyShift8(t, cfg)
	err := s.Run()
	var inc *Incomplete
	if !errors.As(err, &inc) || !strings.Contains(err.Error(), "PFC deadlock") || !strings.Contains(err.Error(), "in a cycle switch") {
		t.Fatalf("Run: %v", err)
	}
	done := 0
	for i, e := range fl.End {
		if e >= 0 {
			done++
			if e < fl.Start[i] || e > s.Stats().SimPs {
				t.Errorf("flow %d: start %d, end %d", i, fl.Start[i], e)
			}
		}
	}
	if done != inc.Done || done == 0 || done == len(specs) || s.Stats().SimPs > s.watch.lastMoveAny+2*s.watch.stallWindow() {
		t.Fatalf("%d flows done (%d reported), stopped at %d ps, last move at %d ps", done, inc.Done, s.Stats().SimPs, s.watch.lastMoveAny)
	}
	if st := s.Stats(); st.SentBytes < st.Delivered+st.DroppedBytes+st.Discarded {
		t.Fatalf("sent %d < delivered %d + dropped %d + discarded %d", st.SentBytes, st.Delivered, st.DroppedBytes, st.Discarded)
	}
}

// dragonflyShift8 prepares seed 003's 72-node dragonfly running a shift-8
// permutation of 16 MiB flows with 2 MB switch buffers, under cfg.
func dragonflyShift8(t *testing.T, cfg Config) (*Sim, *Flows, []flowSpec) {
	tp := gen(t, topo.Params{Family: topo.Dragonfly, GPUs: 72, GPUsPerServer: 1, RoutersPerGroup: 4, TerminalsPerRouter: 2, GlobalPerRouter: 2})
	cfg.BufferBytes = 2 << 20
	var specs []flowSpec
	for i := int32(0); i < 72; i++ {
		specs = append(specs, flowSpec{i, (i + 8) % 72, 16 << 20, nil})
	}
	s, fl := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
	return s, fl, specs
}
