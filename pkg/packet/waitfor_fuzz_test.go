package packet

import (
	"fmt"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// FuzzFatTreeNoDeadlock runs flows on a 16-GPU fat-tree (k=4, one GPU per
// edge port, 100G) under packet configurations the input picks: PFC on,
// PAUSE_TIME 1-10 us, buffers 256 KB-2 MB, static or dynamic thresholds,
// priority or port PFC with its high/low marks, four congestion controls,
// one or four queue pairs, the ECMP seed; then up to 24 flows of 4-128 KiB
// (the input's bytes: source, destination, size), heavy on incast. The
// stall window's floor is lowered from 1 ms to 2 us so that starvation of
// microseconds sets the detector looking. A fat-tree routed up-down has no
// cycle of waits, so no run may report a PFC deadlock, and every run
// delivers every byte, each sent byte delivered, dropped or discarded.
func FuzzFatTreeNoDeadlock(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0})
	f.Add([]byte{0x13, 0x41, 0x1f, 0x2f, 0x3f, 0x4f, 0x5f, 0x6f, 0x7f, 0x8f, 0x9f, 0xaf, 0xbf, 0xcf, 0xdf, 0xef, 0xff})
	f.Add([]byte{0x26, 0x82, 0x15, 0x26, 0x37, 0x48, 0x59, 0x6a, 0x7b, 0x8c, 0x9d, 0xae, 0xbf, 0xc0, 0xd1, 0xe2, 0xf3, 0x04})
	f.Add([]byte{0x3b, 0xc4, 0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f})
	f.Add([]byte{0x08, 0x20, 0xe0, 0xe0, 0xd0, 0xd0, 0xc0, 0xc0, 0xb0, 0xb0, 0xa0, 0xa0, 0x90, 0x90})
	tp := gen(f, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1, SwitchBW: 100e9})
	r, err := route.New(tp)
	if err != nil {
		f.Fatal(err)
	}
	gpus := int32(0)
	for _, n := range tp.Nodes {
		if n.Kind == stream.NodeGPU {
			gpus++
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		a, b := data[0], data[1]
		cfg := DefaultConfig()
		cfg.StopPs = 1e10 // 10 ms: the largest input takes well under 1 ms
		kv := []string{
			"ENABLE_PFC=1",
			"PAUSE_TIME=" + []string{"1", "2", "5", "10"}[a&3],
			"BUFFER_SIZE=" + []string{"0.25", "0.5", "1", "2"}[a>>2&3],
			"USE_DYNAMIC_PFC_THRESHOLD=" + []string{"0", "1"}[a>>4&1],
			"PFC_MODE=" + []string{"priority", "port"}[a>>5&1],
			"CC_MODE=" + []string{"0", "1", "3", "8"}[b&3],
			"QPS_PER_CONNECTION=" + []string{"1", "4"}[b>>2&1],
		}
		if a>>5&1 == 1 && a>>6&1 == 1 {
			kv = append(kv, "PFC_PORT_HIGH_KB=64", "PFC_PORT_LOW_KB=32")
		}
		for _, x := range kv {
			if err := cfg.SetKV(x); err != nil {
				t.Fatal(err)
			}
		}
		// Flows: byte i's high nibble picks the source, its low nibble the
		// size; the destination is GPU 0 unless bit 7 of the next byte says
		// its low nibble (half incast, half scattered).
		var src, dst []int32
		var size []int64
		var total int64
		for i := 2; i < len(data) && len(src) < 24; i++ {
			s, d := int32(data[i]>>4)%gpus, int32(0)
			if i+1 < len(data) && data[i+1]&0x80 != 0 {
				d = int32(data[i+1]&0x0f) % gpus
			}
			if s == d {
				continue
			}
			src, dst = append(src, s), append(dst, d)
			size = append(size, int64(1+data[i]&0x1f)<<12)
			total += size[len(size)-1]
		}
		if len(src) == 0 {
			return
		}
		bd := dag.NewBuilder(len(src))
		for i := range src {
			if err := bd.Add(int64(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		d, err := bd.Build()
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(tp, r, cfg, NewFlows(d, src, dst, size, make([]int64, len(src))), uint64(b>>3))
		if err != nil {
			t.Fatal(err)
		}
		s.watch.stallFloorPs = 2_000_000
		what := fmt.Sprintf("%v, ECMP seed %d, %d flows", kv, b>>3, len(src))
		if err := s.Run(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		st := s.Stats()
		if st.Delivered != total {
			t.Fatalf("%s: delivered %d of %d bytes", what, st.Delivered, total)
		}
		if st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
			t.Fatalf("%s: sent %d, delivered %d + dropped %d + discarded %d", what, st.SentBytes, st.Delivered, st.DroppedBytes, st.Discarded)
		}
	})
}
