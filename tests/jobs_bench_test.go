package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jobSteps runs programs one after another (each reading the file named
// by its in, writing out) and reports their summed wall time and the
// largest resident set among them: the figures of a job-mix pipeline,
// whose merge reads several files and so is no single shell pipe.
type jobSteps struct {
	b    *testing.B
	dir  string
	wall time.Duration
	peak int64
}

func (s *jobSteps) run(in, out string, prog string, args ...string) {
	s.b.Helper()
	c := exec.Command(filepath.Join(binDir, prog), args...)
	c.Dir = ".."
	if in != "" {
		f, err := os.Open(filepath.Join(s.dir, in))
		if err != nil {
			s.b.Fatal(err)
		}
		defer f.Close()
		c.Stdin = f
	}
	f, err := os.Create(filepath.Join(s.dir, out))
	if err != nil {
		s.b.Fatal(err)
	}
	defer f.Close()
	c.Stdout = f
	var stderr strings.Builder
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Run(); err != nil {
		s.b.Fatalf("%s %v: %v: %s", prog, args, err, stderr.String())
	}
	s.wall += time.Since(start)
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > s.peak {
		s.peak = ru.Maxrss
	}
}

func (s *jobSteps) report() {
	s.b.ReportMetric(s.wall.Seconds(), "wall-s")
	s.b.ReportMetric(float64(s.peak)/1024, "peak-MB")
}

// serverList is the Slurm-style GPU list of servers first, first+step,
// ... below servers, gpus GPUs each: jobs interleaved server by server
// share every edge switch.
func serverList(first, step, servers, gpus int) string {
	var parts []string
	for s := first; s < servers; s += step {
		parts = append(parts, fmt.Sprintf("%d-%d", s*gpus, s*gpus+gpus-1))
	}
	return strings.Join(parts, ",")
}

// Issue 34: four AICB jobs of 2,048 GPUs each on an 8,192-GPU 4:1 fat-tree
// (k=32), interleaved server by server so that they share every edge's
// uplinks, each decomposed at collective granularity, merged, and run
// through fluid: the target is under 10 s and 1 GB.
func BenchmarkJobs4x2048Collective(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := &jobSteps{b: b, dir: b.TempDir()}
		s.run("", "topo", "topogen", "--family", "fat-tree", "--fat-tree-k", "32", "--gpus", "8192", "--oversubscription", "4")
		var streams []string
		for j, w := range []struct{ name, file, dp string }{
			{"gpt13b-a", "aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", "256"},
			{"llama7b-tp2", "aicb_L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt", "1024"},
			{"llama7b-zero3", "aicb_L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt", "2048"},
			{"gpt13b-b", "aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", "256"},
		} {
			s.run("topo", w.name, "simccl-decompose", "--workload", "examples/workloads/"+w.file, "--dp", w.dp,
				"--granularity", "collective", "--job", w.name, "--place", serverList(j, 4, 1024, 8))
			streams = append(streams, filepath.Join(s.dir, w.name))
		}
		s.run("", "mix", "simccl-decompose", "--merge", strings.Join(streams, ","))
		s.run("mix", "mix.parquet", "flowsim-analytical", "--model", "fluid")
		s.report()
	}
}

// Issue 34: two jobs of 512 GPUs each (DP AllReduce of 16 MiB at tp 8),
// interleaved server by server on a 1,024-GPU 4:1 fat-tree, at flow
// granularity through packet with two threads.
func BenchmarkJobs2x512PacketThreads2(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := &jobSteps{b: b, dir: b.TempDir()}
		s.run("", "topo", "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "1024", "--oversubscription", "4")
		var streams []string
		for j, name := range []string{"a", "b"} {
			s.run("topo", name, "simccl-decompose", "--op", "allreduce", "--size", "16MiB", "--group", "dp",
				"--tp", "8", "--dp", "64", "--job", name, "--place", serverList(j, 2, 128, 8))
			streams = append(streams, filepath.Join(s.dir, name))
		}
		s.run("", "mix", "simccl-decompose", "--merge", strings.Join(streams, ","))
		s.run("mix", "mix.parquet", "flowsim-packet", "--threads", "2")
		s.report()
	}
}
