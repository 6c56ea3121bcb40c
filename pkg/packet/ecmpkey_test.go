package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

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
		var edge int32 = -1
		for pid := range s.fab.ports {
			if p := &s.fab.ports[pid]; p.from == 0 {
				edge = p.to
			}
		}
		ups, used := 0, 0
		var total int64
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
