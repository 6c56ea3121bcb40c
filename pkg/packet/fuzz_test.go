package packet

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/internal/fuzzflows"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// FuzzRun feeds arbitrary flows (ends that may not be GPUs, missing or
// cyclic deps, delays and link latencies near the end of time) through the
// shared reader into the packet backend, under configurations the input's
// last byte picks (PFC on or off, buffers from 32 MB down to 256 KB, PAUSE
// times from 0.5 to 50 us, four congestion controls, one or three queue
// pairs per connection): bad input is an error, never a hang (a run still
// going after a simulated second fails; a detected PFC deadlock is fine), never a
// panic, and a run that succeeds delivers every byte, and runs the same in
// two parts on two threads as in the single loop.
func FuzzRun(f *testing.F) {
	f.Add([]byte{0, 0, 1, 9, 1, 0, 0, 0, 0, 9, 1, 2, 1, 1, 0, 0})
	f.Add([]byte{1, 1, 3, 4, 3, 2, 3, 1, 2, 5, 4, 0, 2, 3, 0, 1, 0, 0})
	f.Add([]byte{2, 0, 17, 1, 1, 0, 0, 0, 0, 17, 1, 0, 4, 0, 0, 0})
	tops := []*topo.Topology{
		gen(f, topo.Params{Family: topo.SpectrumX, GPUs: 16, NICBW: 100e9}),
		gen(f, topo.Params{Family: topo.DCNDualToR, GPUs: 16}),
		gen(f, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 2}),
	}
	modes := []int{cc.ModeDCQCN, cc.ModeNone, cc.ModeHPCC, cc.ModeDCTCP}
	f.Add([]byte{0, 0, 1, 9, 1, 0, 0, 0, 0, 9, 1, 2, 1, 1, 0, 0, 0xff})
	f.Add([]byte{2, 0, 17, 1, 1, 0, 0, 0, 0, 17, 1, 0, 4, 0, 0, 0, 0x36})
	// Spectrum-X's two servers: 0 -> 9 and 10 -> 1 at once, then 9 -> 11
	// once 0 -> 9 has arrived (released where it starts): two parts take it.
	f.Add([]byte{0, 0, 1, 10, 3, 4, 0, 0, 11, 2, 2, 4, 0, 0, 10, 12, 3, 0, 0, 0, 0, 0})
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
		cfg.CCMode = modes[0]
		if n := len(data); n > 0 {
			c := data[n-1]
			cfg.EnablePFC = c&1 == 0
			cfg.BufferBytes = [4]int64{32 << 20, 4 << 20, 1 << 20, 256 << 10}[c>>1&3]
			cfg.PauseTimePs = [4]int64{5_000_000, 500_000, 50_000_000, 100_000}[c>>3&3]
			cfg.CCMode = modes[c>>5&3]
			cfg.QPsPerConn = 1 + 2*int(c>>7)
		}
		if n := len(data); n > 1 {
			cfg.Routing = Routing(data[n-2] & 3)
			cfg.PortPFC = data[n-2]&4 != 0
			cfg.Transport = Transport(data[n-2] >> 3 & 1)
		}
		s, err := New(set.Topology, r, cfg, FromSet(set), 3)
		if err != nil {
			return
		}
		if err := s.Run(); err != nil {
			var inc *Incomplete
			if errors.As(err, &inc) && !strings.HasPrefix(inc.Reason, "PFC deadlock") {
				t.Fatalf("%v (PFC %v, buffer %d, pause %d ps, %s, %d QPs, routing %s, port PFC %v, transport %s)", err, cfg.EnablePFC, cfg.BufferBytes, cfg.PauseTimePs, s.Algorithm().Name(), cfg.QPsPerConn, cfg.Routing, cfg.PortPFC, cfg.Transport)
			}
			return
		}
		if s.Stats().Delivered != set.TotalBytes() {
			t.Fatalf("delivered %d of %d bytes", s.Stats().Delivered, set.TotalBytes())
		}
		if st := s.Stats(); st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
			t.Fatalf("conservation: sent %d, delivered %d, dropped %d, discarded %d", st.SentBytes, st.Delivered, st.DroppedBytes, st.Discarded)
		}
		// Two parts on two threads run what the single loop ran (when the
		// input is one they take).
		fl := FromSet(set)
		p, err := New(set.Topology, r, cfg, fl, 3)
		if err != nil {
			t.Fatal(err)
		}
		p.parts, p.threads = 2, 2
		if err := p.Run(); err != nil {
			if strings.HasPrefix(err.Error(), "partitions: ") {
				return // a part refuses what it cannot run
			}
			t.Fatalf("two parts: %v, one loop none", err)
		}
		a, b := p.Stats(), s.Stats()
		a.Events, b.Events = 0, 0
		if !slices.Equal(fl.End, s.flows.End) || a != b {
			t.Fatalf("two parts: stats %+v, one loop %+v", a, b)
		}
	})
}
