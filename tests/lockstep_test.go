package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// flowsim-analytical --expand --approx-lockstep (an approximation) moves
// the sibling groups of a COLL node in lockstep with one representative
// per layout. Where every group would run at the same rates anyway it is
// the full expansion: under an even split (spray) on a k=16 fat-tree, a
// DP ring AllReduce (8 groups of 16 ranks) and an EP AllToAll (8 groups of
// 16) end at the full run's nanosecond; so do a DP AllReduce and an EP
// AllToAll on Spectrum-X under ECMP, where each group's traffic stays on
// its rails, and GPT-13B on 16 GPUs. Under ECMP on the fat-tree, at the
// slowest member's rate every step waits for the unluckiest group's hash
// collisions: measured 34% over the full run with all 8 groups in one
// class, 8-10% with classes of 2 (--lockstep-groups 2); at the
// representative's rate (the default) 11% and 10% under.
// The bounds below hold those, with their direction. Per-link loads are
// the full run's. The trace says it is approximate (fabricsim.approximate),
// and so do the summary line and fctstats' reports.
func TestApproxLockstep(t *testing.T) {
	t.Parallel()
	ft := mustRun(t, mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128"), "ncclpath")
	sx := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128")
	// The bounds were measured with NCCL's model latencies (preset=none).
	dp := []string{"--op", "allreduce", "--size", "256MiB", "--group", "dp", "--tp", "8", "--granularity", "collective", "--transport", "preset=none"}
	ep := []string{"--op", "alltoall", "--size", "64MiB", "--group", "ep", "--tp", "2", "--ep", "16", "--granularity", "collective", "--transport", "preset=none"}
	type runSpan struct {
		ns  int64
		out []byte
	}
	sim := func(what string, st []byte, args ...string) runSpan {
		r := run(t, st, "flowsim-analytical", append([]string{"--expand"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s %v: exit %d: %s", what, args, r.code, r.stderr)
		}
		approx := bytes.Contains(r.stderr, []byte("APPROXIMATE (--approx-lockstep)"))
		_, meta := readTrace(t, r.stdout)
		lock := slices.Contains(args, "--approx-lockstep")
		if approx != lock || (meta.Approximate != "") != lock || (meta.Params["approx_lockstep"] == true) != lock {
			t.Errorf("%s %v: summary %q, fabricsim.approximate %q, params %v: want them to say approximate iff --approx-lockstep", what, args, r.stderr, meta.Approximate, meta.Params)
		}
		return runSpan{span(t, r.stdout), r.stdout}
	}
	for _, c := range []struct {
		what   string
		st     []byte
		ecmp   bool
		maxAll float64 // lockstep / full, all groups in one class (ecmp)
		max2   float64 // with --lockstep-groups 2
		minRep float64 // --lockstep-rate representative
		extra  []string
	}{
		{"fat-tree DP ring", mustRun(t, ft, "simccl-decompose", dp...), true, 1.4, 1.12, 0.87, nil},
		{"fat-tree EP AllToAll", mustRun(t, ft, "simccl-decompose", ep...), true, 1.4, 1.15, 0.87, nil},
		{"Spectrum-X DP ring", mustRun(t, sx, "simccl-decompose", dp...), false, 1, 1, 1, nil},
		// Its groups keep to rails of their own: symmetry runs one for
		// all (exact, tests/fabricsym_test.go) unless told not to.
		{"Spectrum-X EP AllToAll", mustRun(t, sx, "simccl-decompose", ep...), false, 1, 1, 1, []string{"--no-symmetry"}},
	} {
		if c.ecmp {
			full := sim(c.what+" spray", c.st, "--routing", "spray")
			for _, rate := range []string{"slowest", "representative"} {
				if lock := sim(c.what+" spray", c.st, "--routing", "spray", "--approx-lockstep", "--lockstep-rate", rate); full.ns != lock.ns {
					t.Errorf("%s under spray, lockstep at the %s's rate: %d ns, full %d ns: want the same", c.what, rate, lock.ns, full.ns)
				}
			}
		}
		full := sim(c.what, c.st, c.extra...)
		all := sim(c.what, c.st, append([]string{"--approx-lockstep", "--lockstep-rate", "slowest"}, c.extra...)...)
		two := sim(c.what, c.st, append([]string{"--approx-lockstep", "--lockstep-rate", "slowest", "--lockstep-groups", "2"}, c.extra...)...)
		rep := sim(c.what, c.st, append([]string{"--approx-lockstep"}, c.extra...)...) // at the representative's rate
		for _, x := range []struct {
			name     string
			got      int64
			min, max float64
		}{{"all groups", all.ns, 1, c.maxAll}, {"classes of 2", two.ns, 1, c.max2}, {"at the representative's rate", rep.ns, c.minRep, 1}} {
			r := float64(x.got) / float64(full.ns)
			if r < x.min*(1-1e-6) || r > x.max*(1+1e-6) {
				t.Errorf("%s, lockstep %s: %d ns, full run %d ns (x%.3f): want x%.2f to x%.2f", c.what, x.name, x.got, full.ns, r, x.min, x.max)
			}
		}
		if c.what == "fat-tree EP AllToAll" {
			if rep := mustRun(t, all.out, "fctstats"); !bytes.Contains(rep, []byte("APPROXIMATE (approx-lockstep")) {
				t.Errorf("fctstats of a lockstep trace does not say it is approximate:\n%s", rep)
			}
			if rep := mustRun(t, full.out, "fctstats"); bytes.Contains(rep, []byte("APPROXIMATE")) {
				t.Errorf("fctstats of a full trace says APPROXIMATE:\n%s", rep)
			}
		}
	}
	// Every member's bytes load its own path: the per-link loads are the
	// full run's, link by link (all but the busy time and utilization).
	dir := t.TempDir()
	ftEP := mustRun(t, ft, "simccl-decompose", ep...)
	var loads [2][]string
	for k, args := range [][]string{nil, {"--approx-lockstep"}} {
		path := filepath.Join(dir, fmt.Sprintf("loads%d.csv", k))
		mustRun(t, ftEP, "flowsim-analytical", append([]string{"--expand", "--link-loads", path}, args...)...)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Split(line, ","); len(f) >= 12 {
				loads[k] = append(loads[k], strings.Join(f[:12], ","))
			}
		}
	}
	if len(loads[0]) < 100 || !slices.Equal(loads[0], loads[1]) {
		t.Errorf("link loads: %d rows full, %d lockstep, or different bytes", len(loads[0]), len(loads[1]))
	}

	// AICB GPT-13B on 16 Spectrum-X GPUs: its DP groups (8 of 2 ranks, one
	// per rail) in lockstep give the full run's iteration, which
	// fctstats --iteration reports as approximate.
	topo16 := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	gpt := mustRun(t, topo16, "simccl-decompose", "--workload", "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", "--granularity", "collective")
	full, lock := sim("GPT-13B", gpt), sim("GPT-13B", gpt, "--approx-lockstep")
	if full.ns != lock.ns {
		t.Errorf("GPT-13B on 16 GPUs: lockstep %d ns, full %d ns", lock.ns, full.ns)
	}
	if rep := mustRun(t, lock.out, "fctstats", "--iteration"); !bytes.Contains(rep, []byte("APPROXIMATE (approx-lockstep")) {
		t.Errorf("fctstats --iteration of a lockstep trace does not say it is approximate:\n%s", rep)
	}
	// Refused where it has no meaning.
	st := mustRun(t, sx, "simccl-decompose", ep...)
	oneLineError(t, run(t, st, "flowsim-analytical", "--approx-lockstep"), 2, "--approx-lockstep needs --expand")
	oneLineError(t, run(t, st, "flowsim-analytical", "--expand", "--model", "busbw", "--approx-lockstep"), 2, "--approx-lockstep needs --expand and --model fluid")
	oneLineError(t, run(t, st, "flowsim-analytical", "--expand", "--lockstep-groups", "2"), 2, "--lockstep-groups 2", "with --approx-lockstep")
}
