package packet

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Under TIE_ORDER push, events of one instant pop in the order they were
// pushed, whichever nodes made them; under the default maker order the
// same pushes pop in another order at some instant (by maker, shuffled).
func TestTieOrderPushPopsInPushOrder(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	rng := rand.New(rand.NewPCG(3, 4))
	reordered := false
	for _, push := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.PushTies = push
		s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{0, 8, 1, nil}})
		for at := int64(1000); at < 1000+50*1000; at += 1000 {
			var want []int32
			for k := range 12 {
				s.cur = int32(rng.IntN(len(tp.Nodes)))
				s.push(at, evWake, int32(k), 0)
				want = append(want, int32(k))
			}
			for k, w := range want {
				ev := s.q.Pop()
				if int64(ev.At) != at {
					t.Fatalf("popped an event at %d, pushed at %d", ev.At, at)
				}
				if ev.Target != w {
					if push {
						t.Fatalf("TIE_ORDER push, instant %d: pop %d is push %d, want %d", at, k, ev.Target, w)
					}
					reordered = true
				}
			}
		}
	}
	if !reordered {
		t.Fatal("maker order popped 50 instants of 12 ties from random makers in push order: the test shows nothing")
	}
}

// A run under TIE_ORDER push delivers every byte, is deterministic, ends
// within a packet time or so of the default order's run (the same network,
// ties broken otherwise), says so in its settings, and is refused for a
// partitioned run, which orders ties by maker.
func TestTieOrderPushRun(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.DCNSingleToR, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	var specs []flowSpec
	for i := int32(1); i < 16; i++ {
		specs = append(specs, flowSpec{i, 0, 2 << 20, nil}, flowSpec{0, i, 1 << 20, nil})
	}
	cfg := DefaultConfig()
	if err := cfg.SetKV("TIE_ORDER=push"); err != nil || !cfg.PushTies {
		t.Fatalf("TIE_ORDER=push: %v, PushTies %v", err, cfg.PushTies)
	}
	if err := cfg.SetKV("TIE_ORDER=maker"); err != nil || cfg.PushTies {
		t.Fatalf("TIE_ORDER=maker: %v, PushTies %v", err, cfg.PushTies)
	}
	_, base := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	cfg.PushTies = true
	s1, f1 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	s2, f2 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	if s1.Stats() != s2.Stats() {
		t.Fatalf("stats differ: %+v vs %+v", s1.Stats(), s2.Stats())
	}
	last := func(f *Flows) (m int64) {
		for _, e := range f.End {
			m = max(m, e)
		}
		return m
	}
	for i := range f1.End {
		if f1.End[i] != f2.End[i] {
			t.Fatalf("flow %d ended at %d and %d", i, f1.End[i], f2.End[i])
		}
	}
	// 30 MiB into GPU 0's 100 Gb/s NIC take 2.5 ms; a 9 KB packet 0.7 us.
	if a, b := last(base), last(f1); a-b > 10_000_000 || b-a > 10_000_000 {
		t.Fatalf("makespan %d ps under maker order, %d under push order: more than 10 us apart", a, b)
	}
	if d := cfg.Describe(); d["tie_order"] != "push" {
		t.Fatalf("settings %v do not say tie_order push", d)
	}
	if d := DefaultConfig(); d.Describe()["tie_order"] != nil {
		t.Fatal("the default order is written to the settings (default traces would change)")
	}
	_, err := NewRun(chain(t), Options{Config: cfg, Partitions: 2, Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "TIE_ORDER push") {
		t.Fatalf("a partitioned run under TIE_ORDER push: error %v", err)
	}
}
