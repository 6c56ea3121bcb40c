package tests

import (
	"crypto/md5"
	"fmt"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// --place packed, and a GPU list naming GPUs 0..N-1 in order, write the
// stream simccl-decompose writes without --place, byte for byte: flow
// and collective granularity, a pipeline schedule, ncclpath's paths.
// (Against the stream before --place existed the md5s were checked by
// hand when it landed: identical for these pipelines.)
func TestDecomposePlacePackedIdentical(t *testing.T) {
	t.Parallel()
	aicb := "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
	cases := []struct {
		name   string
		gpus   string
		paths  bool
		args   []string
		listTo int
	}{
		{"micro allreduce, ncclpath", "128", true, []string{"--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8"}, 127},
		{"aicb, collective granularity", "16", false, []string{"--workload", aicb, "--granularity", "collective"}, 15},
		{"pipeline vpp 2", "16", false, []string{"--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--vpp", "2"}, 15},
		{"dp allreduce, collective granularity", "64", false, []string{"--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8", "--granularity", "collective"}, 63},
	}
	for _, c := range cases {
		tp := mustRun(t, nil, "topogen", "--gpus", c.gpus)
		if c.paths {
			tp = mustRun(t, tp, "ncclpath")
		}
		want := md5.Sum(mustRun(t, tp, "simccl-decompose", c.args...))
		for _, place := range []string{"packed", fmt.Sprintf("0-%d", c.listTo), fmt.Sprintf("0,1-%d", c.listTo)} {
			got := md5.Sum(mustRun(t, tp, "simccl-decompose", append([]string{"--place", place}, c.args...)...))
			if got != want {
				t.Errorf("%s: --place %s: md5 %x, without --place %x", c.name, place, got, want)
			}
		}
	}
}

// A job on servers 2-3 of a 4-server fabric runs as the same job on a
// 2-server fabric: the same per-collective times (fluid and busbw; packet,
// with and without threads, at flow granularity; fluid expanding COLL
// nodes at collective granularity), its groups and flows on GPUs 16-31
// and their servers' NVSwitches only.
func TestDecomposePlaceShifted(t *testing.T) {
	t.Parallel()
	args := []string{"--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8"}
	for _, g := range []string{"flow", "collective"} {
		solo := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", append([]string{"--granularity", g}, args...)...)
		big := mustRun(t, nil, "topogen", "--gpus", "32")
		placed := mustRun(t, big, "simccl-decompose", append([]string{"--granularity", g, "--place", "16-31"}, args...)...)
		top := readTopology(t, big)
		rs := readRaw(t, placed)
		for i, kind := range rs.kinds {
			switch kind {
			case stream.KindGroup:
				gr := decodeOne(t, kind, rs.bodies[i], (*stream.Reader).Group)
				for _, r := range gr.Ranks {
					if r < 16 || r > 31 {
						t.Fatalf("%s: group %d lists GPU %d, off the placement 16-31", g, gr.ID, r)
					}
				}
			case stream.KindFlow:
				f := decodeOne(t, kind, rs.bodies[i], func(r *stream.Reader) (*stream.Flow, error) {
					var f stream.Flow
					return &f, r.Flow(&f)
				})
				for _, n := range []int32{f.Src, f.Dst} {
					if n < int32(top.GPUs) && (n < 16 || n > 31) || n >= int32(top.GPUs) && top.Nodes[n].Server < 2 {
						t.Fatalf("%s: flow %d touches node %d, off servers 2-3", g, f.ID, n)
					}
				}
			}
		}
		backends := [][]string{{"flowsim-analytical", "--model", "fluid"}, {"flowsim-analytical", "--model", "busbw"}}
		if g == "flow" {
			backends = append(backends, []string{"flowsim-packet"}, []string{"flowsim-packet", "--threads", "2"})
		} else {
			backends = append(backends, []string{"flowsim-analytical", "--model", "fluid", "--expand"})
		}
		for _, be := range backends {
			a := collTimes(rowsOf(t, mustRun(t, solo, be[0], be[1:]...)))
			b := collTimes(rowsOf(t, mustRun(t, placed, be[0], be[1:]...)))
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("%s, %v: %d collectives solo, %d placed", g, be, len(a), len(b))
			}
			for id, ns := range a {
				if b[id] != ns {
					t.Errorf("%s, %v: collective %d takes %d ns on servers 2-3 of 4, %d ns on a 2-server fabric", g, be, id, b[id], ns)
				}
			}
		}
	}
}

func rowsOf(t *testing.T, tr []byte) []trace.Row {
	t.Helper()
	rows, _ := readTrace(t, tr)
	return rows
}

// Spread never beats packed for a DP AllReduce on a 4:1 fat-tree; with
// the servers sharing an edge switch when packed, spread crosses its thin
// uplinks and is strictly slower (fluid, flow and collective granularity;
// NCCL's model latencies: under the calibrated transport's per-step costs
// the 4:1-by-uplinks ring is paced below the uplinks' rate and the core
// hops spread adds cost 2% less than packed, flow granularity).
func TestFabricPlaceSpreadOversubscribed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		by     string
		args   []string
		slower float64 // spread at least this times packed
	}{
		// 16 GPU NICs and 4 uplinks per edge: a 2-server job packed stays
		// under one edge switch, spread crosses the uplinks.
		{"hosts", []string{"--tp", "8", "--dp", "2"}, 1.5},
		// 4 GPU NICs and 1 uplink per edge: every server pair crosses the
		// uplinks either way; spread adds core hops.
		{"uplinks", []string{"--tp", "8"}, 1.05},
	}
	for _, c := range cases {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128",
			"--oversubscription", "4", "--oversubscribe-by", c.by)
		for _, g := range []string{"flow", "collective"} {
			var ns [3]int64
			for i, place := range []string{"packed", "spread", "random"} {
				args := append([]string{"--op", "allreduce", "--size", "64MiB", "--group", "dp", "--place", place, "--granularity", g, "--transport", "preset=none"}, c.args...)
				ns[i] = span(t, mustRun(t, mustRun(t, tp, "simccl-decompose", args...), "flowsim-analytical", "--model", "fluid"))
			}
			t.Logf("4:1 by %s, %s granularity: packed %d ns, spread %d ns, random %d ns", c.by, g, ns[0], ns[1], ns[2])
			if ns[2] < ns[0] {
				t.Errorf("4:1 by %s, %s granularity: random %d ns, packed %d ns: random beat packed", c.by, g, ns[2], ns[0])
			}
			if float64(ns[1]) < c.slower*float64(ns[0]) {
				t.Errorf("4:1 by %s, %s granularity: spread %d ns, packed %d ns: want spread at least %.1fx packed", c.by, g, ns[1], ns[0], c.slower)
			}
		}
	}
}

// Placements that cannot be: one line naming --place, exit 1; --place
// with inputs that name GPUs themselves, or --place-keep-tp alone, exit 2.
func TestDecomposePlaceBadInput(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--gpus", "32")
	op := []string{"--op", "allreduce", "--size", "64MiB", "--tp", "8"}
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--place", "0-7,4-11"}, 1, []string{"--place", "GPU 4 is placed twice"}},
		{[]string{"--place", "0-7,200"}, 1, []string{"--place", "GPU 200 is not in the topology's 32 GPUs"}},
		{[]string{"--place", "bogus"}, 1, []string{"--place", "neither a policy"}},
		{[]string{"--place", "7-3"}, 1, []string{"--place"}},
		{[]string{"--place", "packed", "--dp", "8"}, 1, []string{"--place", "64 ranks do not fit the topology's 32 GPUs"}},
		{[]string{"--place", "0-15", "--dp", "4"}, 1, []string{"--place 0-15", "32"}},
		{[]string{"--place", "4-19", "--place-keep-tp"}, 1, []string{"--place 4-19", "TP group 0", "spans servers 0 and 1"}},
		{[]string{"--place-keep-tp"}, 2, []string{"--place-keep-tp"}},
		{[]string{"--place", "spread", "--format", "chakra", "--out", t.TempDir() + "/x"}, 2, []string{"--place"}},
	} {
		oneLineError(t, run(t, tp, "simccl-decompose", append(append([]string{}, op...), c.args...)...), c.code, c.want...)
	}
	// A SimAI workload's all_gpus is the job's size under --place.
	w := writeWorkload(t, "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 all_gpus: 64", "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt")
	oneLineError(t, run(t, tp, "simccl-decompose", "--workload", w, "--place", "spread"), 1, "all_gpus", "do not fit")
}
