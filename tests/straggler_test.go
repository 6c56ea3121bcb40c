package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A data-parallel job (dp 8 on one 8-GPU server, tp 1): each rank computes
// 2 ms forward and 1 ms weight gradient, then AllReduces 64 MiB of
// gradients. Rank 3's compute at 1.5x adds exactly 0.5 x 3 ms to the
// iteration through fluid: the AllReduce's ring waits for the slowest
// rank. A late start (+2 ms) adds exactly 2 ms, server=0:2 (every rank)
// 3 ms; a 1.0 factor writes the stream byte for byte as without the flag.
// At collective granularity (one rank for the stage, the stage's slowest
// factor) the same holds on 16 GPUs.
func TestStragglerAddsItsDelay(t *testing.T) {
	t.Parallel()
	wl := filepath.Join(t.TempDir(), "dp.txt")
	if err := os.WriteFile(wl, []byte("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8\n1\n"+
		"layer\t-1\t2000000\tNONE\t0\t0\tNONE\t0\t1000000\tALLREDUCE\t67108864\t100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gpus string
		gran string
	}{{"8", "flow"}, {"16", "collective"}} {
		top := mustRun(t, nil, "topogen", "--gpus", c.gpus)
		decomp := func(extra ...string) []byte {
			return mustRun(t, top, "simccl-decompose", append([]string{"--workload", wl, "--place", "0-7", "--granularity", c.gran}, extra...)...)
		}
		iter := func(st []byte) int64 {
			return iterationReport(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid")).IterationNs
		}
		base := decomp()
		solo := iter(base)
		if same := decomp("--straggler", "rank=3:1.0"); !bytes.Equal(same, base) {
			t.Errorf("%s: rank=3:1.0 changed the stream (%d bytes against %d)", c.gran, len(same), len(base))
		}
		for _, s := range []struct {
			spec string
			add  int64 // ns
		}{
			{"rank=3:1.5", 1_500_000}, // 0.5 x (2 ms + 1 ms)
			{"rank=3:+2ms", 2_000_000},
			{"server=0:2", 3_000_000},
		} {
			got := iter(decomp("--straggler", s.spec))
			t.Logf("%s granularity on %s GPUs: --straggler %s: %d ns, alone %d ns", c.gran, c.gpus, s.spec, got, solo)
			if got-solo != s.add {
				t.Errorf("%s: --straggler %s: iteration %d ns, %d ns more than without, want %d", c.gran, s.spec, got, got-solo, s.add)
			}
		}
	}
}

// Bad --straggler specs exit 1 in one line naming the flag and the part.
func TestStragglerRefused(t *testing.T) {
	top := mustRun(t, nil, "topogen", "--gpus", "16")
	for spec, want := range map[string]string{
		"rank=8:1.5":   "rank 8 is outside the job",
		"rank=-1:1.5":  "rank -1 is outside the job",
		"rank=3:0":     `factor "0" must be > 0`,
		"rank=3:-2":    `factor "-2" must be > 0`,
		"rank=3:slow":  `factor "slow" is not a number`,
		"rank=3:NaN":   `factor "NaN" is not a number`,
		"gpu=3:1.5":    `unknown key "gpu"`,
		"rank=3":       "no ':'",
		"rank=3:+2":    `delay "2"`,
		"server=1:1.5": "server 1 has no rank of the job",
		"server=9:1.5": "server 9 is not in the topology",
	} {
		r := run(t, top, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--dp", "8", "--place", "0-7", "--straggler", spec)
		oneLineError(t, r, 1, "--straggler", spec, want)
	}
}
