package expand_test

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// Approximate reuse matches a COLL node's groups up to a translation of
// the fabric: on Spectrum-X with 32 GPUs a segment, pipeline stages of 48
// GPUs (a DP group: every other GPU) alternate between one full segment
// then half of the next (stages 0 and 2) and half a segment then a full
// one (stage 1): stages 0 and 2 are placed alike, stage 1 is not, though
// all three have the same ranks per server. The other TP rank's group
// (every other GPU from the second) is placed as the first.
func TestApproxReusePlacement(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 192, GPUType: "A100", NICsPerASW: 4})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Nodes[0].Group == tp.Nodes[32].Group || tp.Nodes[32].Group != tp.Nodes[63].Group {
		t.Fatalf("segments: GPUs 0, 32, 63 in %d, %d, %d; want 32 GPUs a segment", tp.Nodes[0].Group, tp.Nodes[32].Group, tp.Nodes[63].Group)
	}
	w := &workload.Workload{Steps: []workload.Step{{Op: nccl.AllReduce, Size: 1 << 20, Group: workload.DP}}}
	st, _ := decompose(t, tp, workload.Layout{TP: 2, DP: 96, PP: 1, EP: 1}, w, true)
	x := expand.New(readSet(t, st), 0, func(_, _ *flowset.Flow) expand.Early { return expand.AtCompletion })
	dp := func(first int32) [][]int32 {
		var g []int32
		for k := range int32(24) {
			g = append(g, first+2*k)
		}
		return [][]int32{g}
	}
	s0, s1, s2, odd := expand.Placement(x, dp(0)), expand.Placement(x, dp(48)), expand.Placement(x, dp(96)), expand.Placement(x, dp(1))
	if s0 != s2 || s0 != odd {
		t.Errorf("stages 0 and 2, and stage 0's other TP rank, placed apart:\n%s\n%s\n%s", s0, s2, odd)
	}
	if s0 == s1 {
		t.Errorf("stages 0 and 1 placed alike: %s", s0)
	}
	if two := expand.Placement(x, append(dp(0), dp(1)...)); two == expand.Placement(x, append(dp(0), dp(0)...)) {
		t.Errorf("two groups on other GPUs placed as one group twice: %s", two)
	}
}

// A node a transfer met runs the share of its kept time left: each of its
// flows' bytes and times cut to that share (a quarter here, by hand), so a
// paced AllToAll step's pace, a transfer's latency and a delay node's span
// shrink with its bytes (the pace left whole put the calibrated
// transport's EP 6.4% over the exact run's at 1152 GPUs). Nothing cut to
// zero: a flow still moves a byte.
func TestCutToShare(t *testing.T) {
	tr := flowset.Flow{Kind: flowset.Transfer, Size: 1 << 20, Lat: 8000, PaceNs: 4001}
	expand.CutToShare(&tr, 0.25)
	if tr.Size != 1<<18 || tr.Lat != 2000 || tr.PaceNs != 1000 {
		t.Errorf("transfer cut to a quarter: size %d, latency %d ps, pace %d ns; want 262144, 2000, 1000", tr.Size, tr.Lat, tr.PaceNs)
	}
	d := flowset.Flow{Kind: flowset.Delay, Size: 3_000_000}
	expand.CutToShare(&d, 0.25)
	if d.Size != 750_000 {
		t.Errorf("delay cut to a quarter: %d ps, want 750000", d.Size)
	}
	small := flowset.Flow{Kind: flowset.Transfer, Size: 3}
	expand.CutToShare(&small, 0.25)
	if small.Size != 1 || small.Lat != 0 || small.PaceNs != 0 {
		t.Errorf("3 bytes cut to a quarter: size %d, latency %d, pace %d; want 1, 0, 0", small.Size, small.Lat, small.PaceNs)
	}
}
