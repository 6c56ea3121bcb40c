package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/internal/fuzzflows"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// FuzzRun feeds arbitrary flows (ends that may not be GPUs, missing or
// cyclic deps, delays and link latencies near the end of time) through the
// shared reader into the packet backend: bad input is an error, never a
// panic, and a run that succeeds delivers every byte.
func FuzzRun(f *testing.F) {
	f.Add([]byte{0, 0, 1, 9, 1, 0, 0, 0, 0, 9, 1, 2, 1, 1, 0, 0})
	f.Add([]byte{1, 1, 3, 4, 3, 2, 3, 1, 2, 5, 4, 0, 2, 3, 0, 1, 0, 0})
	f.Add([]byte{2, 0, 17, 1, 1, 0, 0, 0, 0, 17, 1, 0, 4, 0, 0, 0})
	tops := []*topo.Topology{
		gen(f, topo.Params{Family: topo.SpectrumX, GPUs: 16, NICBW: 100e9}),
		gen(f, topo.Params{Family: topo.DCNDualToR, GPUs: 16}),
		gen(f, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 2}),
	}
	alg := ccAlg(f, cc.ModeDCQCN)
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := fuzzflows.Set(tops, data, fuzzflows.Options{Sizes: []int64{0, 1, 4096, 1 << 20}, MaxFlows: 32, DelayNodesOnly: true})
		if err != nil || set.RefuseColl("flowsim-packet") != nil { // flowsim-packet refuses collective granularity
			return
		}
		r, err := route.New(set.Topology)
		if err != nil {
			return
		}
		cfg := DefaultConfig()
		cfg.StopPs = 1e12 // a simulated second bounds a degenerate run
		s, err := New(set.Topology, r, cfg, alg, FromSet(set), 3)
		if err != nil {
			return
		}
		if err := s.Run(); err != nil {
			return
		}
		if s.Stats.Delivered+s.Stats.Local != set.TotalBytes() {
			t.Fatalf("delivered %d (+%d local) of %d bytes", s.Stats.Delivered, s.Stats.Local, set.TotalBytes())
		}
		if st := s.Stats; st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
			t.Fatalf("conservation: sent %d, delivered %d, dropped %d, discarded %d", st.SentBytes, st.Delivered, st.DroppedBytes, st.Discarded)
		}
	})
}
