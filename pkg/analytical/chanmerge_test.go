package analytical

import (
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Merged ring channels (expand/chanmerge.go): two channels' flows between
// the same GPUs on two ECMP paths of a fat-tree, sent as one flow with
// weight 2 on the links both cross and 1 on the others. Limited by a link
// both cross (their source's uplink, at half its capacity each), the
// merged flow is what the two would be: the check passes and the rate is
// that half (a third, with another flow on that uplink). With a link on one path only cut to a quarter of the
// capacity, that link limits the merged flow while in the unmerged run it
// would limit one channel only: the check fails.
func TestMergedFlowCheck(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	r, err := route.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := int32(0), int32(tp.GPUs-1) // across pods: 4 paths
	var a, b []route.DirLink
	for h := uint64(0); h < 64 && (b == nil || slices.Equal(a, b)); h++ {
		p, err := r.AppendPathPort(nil, src, dst, h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if a == nil {
			a = p
		} else {
			b = p
		}
	}
	if slices.Equal(a, b) {
		t.Fatal("no second path")
	}
	count := map[route.DirLink]float32{}
	for _, l := range append(slices.Clone(a), b...) {
		count[l]++
	}
	var links []route.DirLink
	for l := range count {
		links = append(links, l)
	}
	slices.Sort(links)
	var w []float32
	var only route.DirLink = -1
	for _, l := range links {
		w = append(w, count[l])
		if count[l] == 1 && only < 0 {
			only = l
		}
	}
	// A third flow on the source's uplink makes it a solve (not the
	// fast path of a flow alone on its links).
	other, err := r.AppendPathPort(nil, src, 1, 0, 0)
	if err != nil || other[0] != a[0] {
		t.Fatalf("no flow sharing the source's uplink (%v)", err)
	}
	for _, c := range []struct{ cut, shared bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		cut := c.cut
		f := newFluid(r, des.NewCalendar(calShift, calLog))
		if cut {
			f.cap[only] /= 4
		}
		id := f.add(0, links, w, 1<<20, 0, 0, 0)
		f.slots[id].full = 2
		nic := f.cap[a[0]] / 2
		if c.shared {
			f.add(1, other, nil, 1<<20, 0, 0, 0)
			nic = f.cap[a[0]] / 3
		}
		f.update(0)
		switch {
		case !cut && (f.inexact || f.hot[id].rate != nic):
			t.Errorf("%+v: limited by the shared uplink: inexact %v, rate %g, want %g", c, f.inexact, f.hot[id].rate, nic)
		case cut && !f.inexact:
			t.Errorf("%+v: limited by a link of one channel only (rate %g): the check passed", c, f.hot[id].rate)
		}
	}
}
