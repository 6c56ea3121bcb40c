package expand_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// drainMembers runs COLL node i's expansion as drain does and returns,
// for each flow in the order it started, its members (as text), and how
// many flows with members had a MembersKey.
func drainMembers(t *testing.T, x *expand.Store, i int32) (out []string, named int) {
	t.Helper()
	ready, err := x.Expand(i)
	if err != nil {
		t.Fatal(err)
	}
	queue := append([]int32(nil), ready...)
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		more, err := x.Started(j)
		if err != nil {
			t.Fatal(err)
		}
		queue = append(queue, more...)
		f := x.Flow(j)
		if _, ok := x.MembersKey(j); ok && len(x.Members(j)) > 0 {
			named++
		}
		out = append(out, fmt.Sprintf("%d %d>%d ch%d %v", f.ID, f.Src, f.Dst, f.Channel, slices.Clone(x.Members(j))))
		queue, _ = x.Complete(j, queue)
	}
	return out, named
}

// Lockstep attaches to a representative's later rows its members'
// images (each rank replaced by the one at its position in the member
// group) instead of making the members' rows: the members, their ids,
// channels and ports, and the counts of flows, bytes and members are
// those of making every member row and matching it flow by flow
// (MakeMemberRows); only imaged members have a MembersKey. DP rings across servers on a fat-tree and on
// Spectrum-X and dual-plane HPN (two NIC ports a GPU), whose 8 DP groups of 8 (one per TP index) share a layout.
func TestLockstepMemberImages(t *testing.T) {
	for _, fam := range []topo.Params{
		{Family: topo.FatTree, K: 8, GPUs: 64, GPUType: "A100"},
		{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100"},
		{Family: topo.HPNDualPlane, GPUs: 64, GPUType: "A100"}, // dual-homed NICs: ports
	} {
		tp, _, err := topo.Generate(fam)
		if err != nil {
			t.Fatal(err)
		}
		l := workload.Layout{TP: 8, DP: 8, PP: 1, EP: 1}
		for _, st := range []workload.Step{
			{Op: nccl.AllReduce, Size: 64 << 20, Group: workload.DP},
			{Op: nccl.AllGather, Size: 16 << 20, Group: workload.DP},
			{Op: nccl.ReduceScatter, Size: 16 << 20, Group: workload.DP},
		} {
			w := &workload.Workload{Steps: []workload.Step{st}}
			collSt, _ := decompose(t, tp, l, w, true)
			var got [2][]string
			var counts [2]string
			var imaged [2]int64
			var named [2]int
			for k := range 2 {
				in := readSet(t, collSt)
				x := expand.New(in, 0, func(_, _ *flowset.Flow) expand.Early { return expand.AtCompletion })
				x.UseLockstep(0)
				if k == 1 {
					x.MakeMemberRows()
				}
				for i := int32(0); i < int32(in.DAG.Len()); i++ {
					if in.Flow(i).Kind == flowset.Coll {
						out, n := drainMembers(t, x, i)
						got[k], named[k] = append(got[k], out...), named[k]+n
					}
				}
				n, c, m := x.Lockstepped()
				counts[k] = fmt.Sprintf("made %d bytes %d lockstep %d %d %d", x.Made(), x.Bytes(), n, c, m)
				imaged[k] = expand.ImagedRows(x)
			}
			name := fmt.Sprintf("%s %s %s", fam.Family, st.Op, st.Group)
			if imaged[0] == 0 || imaged[1] != 0 {
				t.Errorf("%s: %d rows imaged, %d with member rows made: want some, none", name, imaged[0], imaged[1])
			}
			if ports := fam.Family == topo.HPNDualPlane; (named[0] == 0) != ports || named[1] != 0 {
				t.Errorf("%s: %d flows with members had a MembersKey, %d with member rows made: want some (none with ports), none", name, named[0], named[1])
			}
			if counts[0] != counts[1] {
				t.Errorf("%s: images: %s; member rows: %s", name, counts[0], counts[1])
			}
			if !slices.Equal(got[0], got[1]) {
				for j := range min(len(got[0]), len(got[1])) {
					if got[0][j] != got[1][j] {
						t.Fatalf("%s: flow %d started: images %s, member rows %s", name, j, got[0][j], got[1][j])
					}
				}
				t.Fatalf("%s: %d flows started with images, %d with member rows", name, len(got[0]), len(got[1]))
			}
			t.Logf("%s: %d flows, %s, %d rows imaged", name, len(got[0]), counts[0], imaged[0])
		}
	}
}
