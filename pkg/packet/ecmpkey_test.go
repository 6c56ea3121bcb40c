package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// uplinksUsed is how many of GPU 0's edge switch's uplinks (to aggregation
// switches) carried bytes in run s, of how many, and their bytes.
func uplinksUsed(t *testing.T, s *Sim, tp *topo.Topology) (used, ups int, total int64) {
	t.Helper()
	var edge int32 = -1
	for pid := range s.fab.ports {
		if p := &s.fab.ports[pid]; p.from == 0 {
			edge = p.to
		}
	}
	for pid := range s.fab.ports {
		if p := &s.fab.ports[pid]; p.from == edge && tp.Nodes[p.to].Role == topo.RoleAgg {
			ups++
			total += p.txBytes
			if p.txBytes > 0 {
				used++
			}
		}
	}
	if ups != 2 {
		t.Fatalf("GPU 0's edge switch %d has %d uplinks, want 2", edge, ups)
	}
	return used, ups, total
}

// With ECMP_KEY connection every transfer of one connection (GPU pair and
// channel) opens its queue pair on the path the connection hashed to: 16
// transfers from GPU 0 to a GPU in another pod, one after the other, load
// one of GPU 0's edge switch's two uplinks with all their bytes. Hashed
// per transfer, as by default, they spread over both (all 16 on one
// uplink would be a 1 in 2^15 draw). flowsim-analytical's
// TestECMPKeyConnection holds its fluid model to the same; the trace's
// params name the key only when it is not the default.
func TestECMPKeyConnection(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	const size = 1 << 20
	dst := int32(tp.GPUs - 1) // another pod
	var specs []flowSpec
	for i := int64(0); i < 16; i++ {
		f := flowSpec{0, dst, size, nil}
		if i > 0 {
			f.deps = []int64{i - 1}
		}
		specs = append(specs, f)
	}
	for _, key := range []route.HashKey{route.KeyTransfer, route.KeyConnection} {
		cfg := DefaultConfig()
		cfg.ECMPKey = key
		s, _ := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
		used, _, total := uplinksUsed(t, s, tp)
		if total < 16*size {
			t.Errorf("%s: the uplinks carry %d bytes, under the transfers' %d", key, total, 16*size)
		}
		if want := map[route.HashKey]int{route.KeyTransfer: 2, route.KeyConnection: 1}[key]; used != want {
			t.Errorf("%s: %d uplinks carry the connection's bytes, want %d", key, used, want)
		}
		if _, named := cfg.Describe()["ecmp_key"]; named != (key == route.KeyConnection) {
			t.Errorf("%s: params name ecmp_key: %v", key, named)
		}
	}
}

// A connection is its GPU pair and its channel: the same 16 transfers read
// from a stream on one channel take one uplink under ECMP_KEY connection,
// and on 16 channels (16 connections, as 16 NCCL channels' queue pairs)
// both.
func TestECMPKeyConnectionChannels(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	for _, channels := range []int32{1, 16} {
		var flows []stream.Flow
		for k := int64(0); k < 16; k++ {
			f := stream.Flow{ID: k, Collective: -1, Src: 0, Dst: int32(tp.GPUs - 1), Size: 1 << 20, Channel: int32(k) % channels, ConnType: stream.ConnP2P}
			if k > 0 {
				f.Deps = []int64{k - 1}
			}
			flows = append(flows, f)
		}
		set := flowSet(t, tp, flows)
		cfg := DefaultConfig()
		cfg.ECMPKey = route.KeyConnection
		s, err := NewRun(set, Options{Config: cfg, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		used, _, _ := uplinksUsed(t, s, tp)
		if want := map[int32]int{1: 1, 16: 2}[channels]; used != want {
			t.Errorf("%d channels: %d uplinks carry the transfers, want %d", channels, used, want)
		}
	}
}
