package collective

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// FuzzParseMSCCL: any XML parses or fails with a located error, and what
// parses decomposes without panicking.
func FuzzParseMSCCL(f *testing.F) {
	for _, p := range []string{"../../examples/msccl/ring_allreduce_8.xml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="1" chan="0"><step s="0" type="s" cnt="1" depid="-1" deps="-1"/></tb></gpu><gpu id="1"><tb id="0" send="0" recv="0" chan="0"><step s="0" type="r" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`))
	// Shapes that must be refused: no GPUs, no chunks, an unknown step
	// type, a dependency on a step that does not exist.
	for _, bad := range []string{
		`<algo name="x" coll="allreduce" ngpus="-1" nchannels="1" nchunksperloop="2"></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="0"><gpu id="0"/><gpu id="1"/></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="warp" cnt="1" depid="-1" deps="-1"/></tb></gpu><gpu id="1"/></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="s" cnt="1" depid="7" deps="3"/></tb></gpu><gpu id="1"/></algo>`,
	} {
		f.Add([]byte(bad))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseMSCCL(strings.NewReader(string(data)), "fuzz.xml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.xml: ") {
				t.Fatalf("unlocated error %q", err)
			}
			return
		}
		if a.NGPUs > 64 {
			return
		}
		ranks := make([]int32, a.NGPUs)
		entry := make([][]int64, a.NGPUs)
		for i := range ranks {
			ranks[i] = int32(i)
		}
		c := newCtx(NewEmitter(&collect{}), Fabric{GPUs: a.NGPUs, GPUsPerServer: a.NGPUs}, 0, ranks, entry)
		_ = a.Emit(c, 1<<20)
	})
}

// FuzzExpand: any collective record either expands into a well-formed DAG
// (ids dense from 0, every dep an earlier id, rows pulled in any order) or
// is refused with an error; never a panic. Sizes stay small so that a run
// is short; the memory of large ones is the backend's to bound.
func FuzzExpand(f *testing.F) {
	s := newSetup(f, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	x := NewExpander(s.topo)
	f.Add(uint8(0), uint8(0), uint8(2), 2, int64(1<<16), int64(4096), int64(16), int64(1000), 2, true)
	f.Add(uint8(0), uint8(2), uint8(2), 4, int64(1<<16), int64(0), int64(0), int64(0), 8, false)
	f.Add(uint8(3), uint8(5), uint8(0), 1, int64(4096), int64(0), int64(0), int64(5), 16, false)
	f.Fuzz(func(t *testing.T, opI, algoI, protoI uint8, channels int, size, chunk, maxChunks, lat int64, n int, two bool) {
		ops := []Op{AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv}
		algos := []Algo{AlgoRing, AlgoTree, AlgoNVLS, AlgoNVLSTree, AlgoPAT, AlgoPXN, AlgoDirect, AlgoP2P, AlgoMSCCL}
		// Every input is folded into the ranges a run can afford (sizes up
		// to 64 KiB plus -1, groups of 1-16, at most 2000 channels and 64
		// chunks), so that each one is exercised rather than skipped.
		size = fold(size+1, 1<<16+2) - 1
		n = int(fold(int64(n), 16)) + 1
		channels = int(fold(int64(channels)+1, 2002)) - 1
		chunk = fold(chunk, 1<<20)
		maxChunks = fold(maxChunks, 65)
		lat = fold(lat, 1e9)
		rec := stream.Collective{ID: 1, Op: string(ops[int(opI)%len(ops)]), Algorithm: algos[int(algoI)%len(algos)].String(),
			Protocol: Proto(int(protoI) % 3).String(), Channels: channels, Size: size,
			Cut: &stream.Cut{ChunkBytes: chunk, MaxChunks: maxChunks, BaseLatPs: lat, IntraLatPs: lat, InterLatPs: 2 * lat}}
		groups := [][]int32{make([]int32, n)}
		for i := range groups[0] {
			groups[0][i] = int32(i)
		}
		if two && n <= 8 {
			g := make([]int32, n)
			for i := range g {
				g[i] = int32(8 + i)
			}
			groups = append(groups, g)
		}
		var ids []int64
		deps := map[int64][]int64{}
		p, err := x.Start(&rec, groups, func(_ Origin, fl *stream.Flow) error {
			ids = append(ids, fl.ID)
			deps[fl.ID] = append([]int64(nil), fl.Deps...)
			return nil
		})
		if err != nil {
			return
		}
		for g := p.Gens() - 1; g >= 0; g-- { // backwards: any order must do
			for {
				more, err := p.Row(g)
				if err != nil {
					t.Fatal(err)
				}
				if !more {
					break
				}
			}
		}
		slices.Sort(ids)
		for i, id := range ids {
			if id != int64(i) {
				t.Fatalf("ids %v... not dense from 0 (%d at %d)", ids[:min(len(ids), 8)], id, i)
			}
			for _, d := range deps[id] {
				if d < 0 || d >= id {
					t.Fatalf("flow %d depends on %d", id, d)
				}
			}
		}
	})
}

// fold maps v onto 0..m-1 (m > 0), negative values included.
func fold(v, m int64) int64 {
	return (v%m + m) % m
}
