package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// NVLink cells, by hand: GPU 0 of an A100 server sends 8 KiB to each of
// GPUs 1-4 at once over its NVLink port (1920 Gb/s, 25 ns a link).
// As NCCL transport steps (a pace) they go in 16 cells of 512 bytes, each
// with 3 of a packet's 48 header bytes (48 x 512 / 9000, rounded up), which
// the port sends in turn: transfer k's last cell is the (61+k)th to leave,
// then crosses the NVSwitch (one cell stored and forwarded, 50 ns of
// links), so the four arrive within 3 cells of each other, as sharing
// the port would have them. Without a pace each is one 8240-byte packet
// and transfer k arrives after k+1 of them and its own forwarding: 103 ns
// apart from first to last. A paced transfer through a NIC is not cut.
func TestNVLinkCells(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	const bitPs = 8e12 / 1920e9
	tx := func(wire int64) int64 { return int64(float64(wire)*bitPs + 0.5) }
	for _, c := range []struct {
		name    string
		pace    int64
		packets uint64
		rx      func(k int64) int64
	}{
		{"paced", 1000, 64, func(k int64) int64 { return (61+k)*tx(515) + tx(515) + 50_000 }},
		{"unpaced", 0, 4, func(k int64) int64 { return (k+1)*tx(8240) + tx(8240) + 50_000 }},
	} {
		var flows []stream.Flow
		for k := range int64(4) {
			flows = append(flows, stream.Flow{ID: k, Src: 0, Dst: int32(k + 1), Size: 8192, ConnType: stream.ConnP2P, Channel: int32(k), PacePs: c.pace})
		}
		set := flowSet(t, tp, flows)
		s, err := NewRun(set, Options{Config: DefaultConfig(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.flows.RxDone = make([]int64, set.Flows())
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.DataPackets != c.packets || st.Delivered != 4*8192 {
			t.Errorf("%s: %d data packets delivering %d bytes, want %d delivering %d", c.name, st.DataPackets, st.Delivered, c.packets, 4*8192)
		}
		for k := range int64(4) {
			if got := s.flows.RxDone[k] - s.flows.StartPs(int32(k)); got != c.rx(k) {
				t.Errorf("%s: transfer %d's last byte after %d ps, want %d", c.name, k, got, c.rx(k))
			}
		}
	}
	// Across servers, through the NIC: a packet as before.
	set := flowSet(t, tp, []stream.Flow{{ID: 0, Src: 0, Dst: 8, Size: 8192, ConnType: stream.ConnP2P, PacePs: 1000}})
	s, err := NewRun(set, Options{Config: DefaultConfig(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().DataPackets; n != 1 {
		t.Errorf("a paced 8 KiB transfer between servers: %d data packets, want 1", n)
	}
}
