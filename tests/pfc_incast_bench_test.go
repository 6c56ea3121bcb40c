package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// htsim's CPU seconds on its own incast matrices (examples/htsim/gen_cm.py
// incast 128 FANIN 2000000) on a k=8 fat-tree of 100G, 1 us links, RoCE
// without congestion control, PFC, 4000-B MTU, as measured for issue 36
// (htsim cannot be built here).
const (
	htsimIncast32CPU  = 0.07
	htsimIncast127CPU = 0.33
)

// Issue 36: the PFC-heavy incasts beside htsim: flowsim-packet's CPU
// seconds (user + system: the machine may be shared, wall time is not its
// own), its whole run (topology and stream read, simulation, trace
// written), with PFC at issue 31's lossless settings (static thresholds,
// PAUSE_TIME 5 us) in 1 and 2 MB switch buffers, and under PFC_MODE port,
// htsim's own. The target is the htsim figure, reported beside each.
//
// Measured at 9e7fc53 against fea9ff3 on the 2-core VM under load (load 5
// to 8: other sessions' runs), CPU min of five a case over three
// alternating rounds: 32to1 0.055, 0.041, 0.033 s (before 0.046, 0.035,
// 0.032), 127to1 0.325, 0.191, 0.113 s (before 0.321, 0.213, 0.118). The
// load's noise is larger than the 6.7% fewer instructions cachegrind
// counts on 127to1-buf1MB (2.254 G -> 2.103 G; 32to1-buf1MB 4.6%).
func BenchmarkPacketPFCIncastHtsim(b *testing.B) {
	dir := b.TempDir()
	topoOut, err := exec.Command(filepath.Join(binDir, "topogen"), "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128",
		"--gpus-per-server", "1", "--nic-bw", "100Gbps", "--switch-bw", "100Gbps", "--nic-latency", "1us", "--switch-latency", "1us").Output()
	if err != nil {
		b.Fatal(err)
	}
	lossless := []string{"--set", "CC_MODE=0", "--set", "USE_DYNAMIC_PFC_THRESHOLD=0", "--set", "PACKET_PAYLOAD_SIZE=4000", "--set", "PAUSE_TIME=5"}
	for _, fanIn := range []int{32, 127} {
		// gen_cm.py's incast shape: hosts 1..FANIN send 2 MB to host 0 at 0.
		var cm strings.Builder
		fmt.Fprintf(&cm, "Nodes 128\nConnections %d\n", fanIn)
		for i := 1; i <= fanIn; i++ {
			fmt.Fprintf(&cm, "%d->0 id %d start 0 size 2000000\n", i, i)
		}
		cmPath := filepath.Join(dir, fmt.Sprintf("incast%d.cm", fanIn))
		if err := os.WriteFile(cmPath, []byte(cm.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		dec := exec.Command(filepath.Join(binDir, "simccl-decompose"), "--from-htsim", cmPath)
		dec.Stdin = bytes.NewReader(topoOut)
		stream, err := dec.Output()
		if err != nil {
			b.Fatal(err)
		}
		htsim := htsimIncast32CPU
		if fanIn == 127 {
			htsim = htsimIncast127CPU
		}
		for _, c := range []struct {
			name string
			set  []string
		}{
			{"buf1MB", append(append([]string(nil), lossless...), "--set", "BUFFER_SIZE=1")},
			{"buf2MB", append(append([]string(nil), lossless...), "--set", "BUFFER_SIZE=2")},
			{"port", []string{"--set", "CC_MODE=0", "--set", "PACKET_PAYLOAD_SIZE=4000", "--set", "PFC_MODE=port"}},
		} {
			b.Run(fmt.Sprintf("%dto1-%s", fanIn, c.name), func(b *testing.B) {
				best := -1.0 // the least of b.N runs: a shared machine only adds
				for i := 0; i < b.N; i++ {
					cmd := exec.Command(filepath.Join(binDir, "flowsim-packet"), append(c.set, "-o", filepath.Join(dir, "trace.arrow"))...)
					cmd.Stdin = bytes.NewReader(stream)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					if err := cmd.Run(); err != nil {
						b.Fatalf("%v: %s", err, stderr.String())
					}
					if cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(); best < 0 || cpu < best {
						best = cpu
					}
					if i == 0 {
						b.Log(strings.TrimSpace(stderr.String()))
					}
				}
				b.ReportMetric(best, "cpu-s")
				b.ReportMetric(htsim, "htsim-cpu-s")
			})
		}
	}
}
