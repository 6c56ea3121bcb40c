package packet

import (
	"bytes"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/flowset"
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
		if len(data) < 2 {
			return
		}
		tp := *tops[int(data[0])%len(tops)]
		if data[1]&1 != 0 {
			tp.Links = append([]stream.Link(nil), tp.Links...)
			for i := range tp.Links {
				if tp.Links[i].Kind == stream.LinkNIC {
					tp.Links[i].LatencyPs = 1 << 62
				}
			}
		}
		data = data[2:]
		sizes := []int64{0, 1, 4096, 1 << 20}
		var flows []stream.Flow
		for id := int64(0); len(data) >= 6 && id < 32; id++ {
			b := data[:6]
			data = data[6:]
			fl := stream.Flow{ID: id, Src: int32(b[0]) - 1, Dst: int32(b[1]) - 1, Size: sizes[int(b[2])%len(sizes)], ConnType: stream.ConnRing}
			switch b[3] % 8 {
			case 0:
				fl.Deps = []int64{int64(b[4]) % 40}
			case 1:
				fl.Deps = []int64{int64(b[4]) % (id + 1), int64(b[5]) % (id + 1)}
			case 2:
				fl.Size, fl.ConnType = 0, stream.ConnDelay
			}
			switch b[5] % 5 {
			case 1:
				fl.Size, fl.DelayPs = 0, int64(b[4])*1000
			case 2:
				fl.Size, fl.DelayPs = 0, 1<<62
			}
			flows = append(flows, fl)
		}
		var buf bytes.Buffer
		w, _ := stream.NewWriter(&buf, "fuzz")
		w.Topology(&tp)
		for i := range flows {
			w.Flow(&flows[i])
		}
		w.Close()
		sr, err := stream.NewReader(&buf, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		set, err := flowset.Read(sr)
		if err != nil {
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
