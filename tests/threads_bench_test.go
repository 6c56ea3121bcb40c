package tests

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Issue 32: --threads 2 on a machine whose cores are all busy is no
// slower than the single loop. The 128-GPU micro run (BenchmarkPacketMicro128)
// with one and two threads, on the machine as it is and then beside one
// busy process per core that the benchmark starts and stops, back to back
// so that the four figures share the machine's moment. Other work on the
// machine adds to both conditions.
func BenchmarkPacketThreadsBusy(b *testing.B) {
	topo := mustRun(b, nil, "topogen", "--family", "spectrum-x", "--gpus", "128", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	in := mustRun(b, topo, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "16")
	ideal := "" // the parallel summary's, when --threads 2 ran parts
	wall := func(threads string) float64 {
		c := exec.Command(filepath.Join(binDir, "flowsim-packet"), "--conf", "examples/conf/default.conf", "--threads", threads)
		c.Dir = ".."
		c.Stdin, c.Stdout = bytes.NewReader(in), io.Discard
		var stderr bytes.Buffer
		c.Stderr = &stderr
		start := time.Now()
		if err := c.Run(); err != nil {
			b.Fatalf("flowsim-packet --threads %s: %v: %s", threads, err, stderr.Bytes())
		}
		secs := time.Since(start).Seconds()
		if m := idealLine.FindSubmatch(stderr.Bytes()); m != nil && ideal == "" {
			ideal = fmt.Sprintf("; ideal speedup of two parts %s", m[1])
		}
		return secs
	}
	for i := 0; i < b.N; i++ {
		// What else ran: "idle" is the machine as found.
		load := loadAverage()
		idle1, idle2 := wall("1"), wall("2")
		stop := hog(b, runtime.NumCPU())
		busy1, busy2 := wall("1"), wall("2")
		stop()
		fmt.Printf("packet micro 128 GPUs, load average %s: as found --threads 1 %.2f s, --threads 2 %.2f s; beside %d busy processes --threads 1 %.2f s, --threads 2 %.2f s%s\n",
			load, idle1, idle2, runtime.NumCPU(), busy1, busy2, ideal)
		b.ReportMetric(idle1, "idle-1-s")
		b.ReportMetric(idle2, "idle-2-s")
		b.ReportMetric(busy1, "busy-1-s")
		b.ReportMetric(busy2, "busy-2-s")
	}
}

// hog starts n processes that keep a core busy each and returns what
// stops them (only those, by their pids).
func hog(b *testing.B, n int) (stop func()) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	time.Sleep(200 * time.Millisecond) // under way
	return func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
}
