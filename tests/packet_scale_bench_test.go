package tests

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Issue 11: flowsim-packet at scale. Both runs are minutes long and take
// gigabytes; `make bench` runs them once (-benchtime 1x). Select them with
// -bench PacketScale.

var packetSummary = regexp.MustCompile(`(\d+) events \(([\d.]+) M/s\), (\d+) data packets.*wall ([\d.]+) s`)

// reportPacket reports events/s and data packets/s from flowsim-packet's
// summary line.
func reportPacket(b *testing.B, out string) {
	b.Helper()
	evs, pkts, secs := packetFigures(b, out)
	b.ReportMetric(evs*1e6, "events/s")
	b.ReportMetric(pkts, "data-packets")
	b.ReportMetric(pkts/secs, "data-packets/s")
}

// packetFigures reads flowsim-packet's summary line: M events/s, data
// packets, wall seconds.
func packetFigures(b *testing.B, out string) (evs, pkts, secs float64) {
	b.Helper()
	m := packetSummary.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no summary line in %q", out)
	}
	evs, _ = strconv.ParseFloat(m[2], 64)
	pkts, _ = strconv.ParseFloat(m[3], 64)
	secs, _ = strconv.ParseFloat(m[4], 64)
	return evs, pkts, secs
}

// A 1024-GPU Spectrum-X H100 cluster (TP 8, DP 128) running one DP
// AllReduce of 64 MiB: about 16.3 million data packets. Its events miss
// the caches (the packets and ports in flight outgrow them): reading the
// next arrival's packet ahead (internal/prefetch) took it from 34.9 s to
// 33.1 s on an idle machine, one core (8 MiB: 5.7 s to 4.8 s). On a later
// machine, 23.4-26.5 s by hand; with the calendar's buckets sorted once
// instead of kept as heaps, 16.9-21.8 s (8 MiB: 3.0-3.5 s to 2.7-2.8 s)
// and this benchmark 21.0 s, 93 MB, 5.84 M events/s. The target is 15 s.
// The same AllReduce on 128 GPUs runs 15.2 M events/s (2.2 M data
// packets/s, 7.0 events each; 1024 GPUs: 7.5): an event costs 66 ns when
// the packets and ports in flight fit the caches and 160 ns when not.
// The scale and thread benchmarks decompose with NCCL's model latencies
// (--transport preset=none), the streams issue 36's figures were taken on.
func BenchmarkPacketScaleAllReduce1024(b *testing.B) {
	for i := 0; i < b.N; i++ {
		reportPacket(b, measure(b,
			[]string{"topogen", "--family", "spectrum-x", "--gpus", "1024"},
			[]string{"simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8", "--transport", "preset=none"},
			[]string{"flowsim-packet", "--conf", "examples/conf/default.conf"}))
	}
}

// The same AllReduce through the partitioned loop (--threads 2 --partitions
// 2: two parts on two threads, forced even on a busy machine), which writes
// the single loop's trace byte for byte, right after the single loop, so
// that speedup-x (single loop's wall over two threads') compares runs of
// one moment: this VM's speed drifts by 10% over a day. The target is 1.8x
// on an idle 2-core machine. First measured (separately), twice: 8.23 and
// 7.61 s (174 MB: parts keep every queue pair's slot) against 12.19 and
// 12.24 s (92 MB), 1.48x and 1.61x, when the single loop still ordered ties
// in push order and the partitioned loop's maker order cost its calendar
// more sorting, and the parts were blocks of servers (0.41 packets or
// frames crossing parts an event; cut by the flows' load, 0.004).
func BenchmarkPacketScaleAllReduce1024Threads2(b *testing.B) {
	benchThreads2(b, packetCases[0])
}

// The 2048-GPU AllToAll (below) likewise.
func BenchmarkPacketScaleAllToAll2048Threads2(b *testing.B) {
	benchThreads2(b, packetCases[1])
}

// packetCase is a workload of the parallel loop's benchmarks.
type packetCase struct {
	name, short  string
	topo, decomp []string
}

// The parallel loop's two cases (issue 36): a DP AllReduce of 64 MiB on
// 1024 GPUs (16.3 M data packets, 122 M events) and a direct AllToAll of
// 16 MiB per rank on 2048 GPUs (4.2 M flows, 76 M events).
var packetCases = []packetCase{
	{"AllReduce 1024 GPUs 64 MiB", "ar1024",
		[]string{"topogen", "--family", "spectrum-x", "--gpus", "1024"},
		[]string{"simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8", "--transport", "preset=none"}},
	{"AllToAll 2048 GPUs 16 MiB", "a2a2048",
		[]string{"topogen", "--family", "spectrum-x", "--gpus", "2048"},
		[]string{"simccl-decompose", "--op", "alltoall", "--size", "16MiB", "--group", "dp", "--algo", "direct", "--transport", "preset=none"}},
}

func (c packetCase) run(b *testing.B, args ...string) string {
	return measure(b, c.topo, c.decomp, append([]string{"flowsim-packet", "--conf", "examples/conf/default.conf"}, args...))
}

// benchThreads2 runs c on the single loop, then on two parts and threads,
// and reports the wall speedup (and what the machine was doing).
func benchThreads2(b *testing.B, c packetCase) {
	for i := 0; i < b.N; i++ {
		load := loadAverage()
		_, _, one := packetFigures(b, c.run(b))
		out := c.run(b, "--threads", "2", "--partitions", "2") // its wall-s and peak-MB are reported last
		reportPacket(b, out)
		_, _, two := packetFigures(b, out)
		b.ReportMetric(one, "single-loop-s")
		b.ReportMetric(one/two, "speedup-x")
		fmt.Printf("packet %s, load average %s: single loop %.2f s, --threads 2 %.2f s: %.2fx (ideal %.2f)\n", c.name, load, one, two, one/two, idealSpeedup(b, out))
		if m := cpuLine.FindStringSubmatch(out); m != nil {
			// From the threads' clocks: what the parts cost, and whether
			// the cores slowed each other (parts' CPU above the single
			// loop's) or waited (projected above the measured speedup).
			fmt.Printf("packet %s: %s\n", c.name, m[0])
		}
	}
}

// cpuLine is the parallel summary's CPU line, from its parts' CPU to its
// projected speedup.
var cpuLine = regexp.MustCompile(`parts [\d.]+ s.*projected speedup on idle cores [\d.]+`)

var idealLine = regexp.MustCompile(`ideal speedup ([\d.]+)`)

// idealSpeedup reads the ideal speedup from flowsim-packet's parallel
// summary.
func idealSpeedup(b *testing.B, out string) float64 {
	b.Helper()
	m := idealLine.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no parallel summary in %q", out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// loadAverage is /proc/loadavg's three figures: what else the machine ran.
func loadAverage() string {
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		return strings.Join(strings.Fields(string(l))[:3], " ")
	}
	return "unknown"
}

// Issue 36: the parallel loop's ceiling, on any machine. With 8, 16 and
// 32 parts on one thread (slow, but the counts are the same at any threads),
// the ideal speedup: events over the sum of each window's busiest part,
// what as many idle cores could reach at best. The target is 7 at 8 parts
// and 12 at 16 on both cases. With the parts in blocks of servers it was
// 7.42 and 14.15 on the AllReduce, with 0.41 and 0.48 packets crossing
// parts an event, and 4.52 and 8.44 on the AllToAll (0.36 and 0.44; a
// part's events over the whole run within 1% of the others', but not
// window by window). Cut by the flows' load (partplan.go), on a loaded
// 2-core machine: 7.08 and 13.35 on the AllReduce (tiers; 0.007 and
// 0.008 crossings an event, and 48 and 61 s of CPU against 68 and 80 s
// in blocks), 6.78 and 12.30 on the AllToAll (clusters; 0.46 and 0.50);
// with the clusters refined by the model's phase-summed cost, 7.41 and
// 12.34 on the AllToAll (0.467 and 0.501), the AllReduce unchanged. A
// stop later, 7.08 and 13.35, and 7.38 and 12.14 (loaded machine).
// Also 32 parts, and each count with half as many threads taking the
// parts heaviest first: more parts than threads even out what drifts
// between parts over hundreds of windows (the AllReduce's rails falling
// out of step), which no cut does: 7.74 for 16 parts on 8 threads and
// 15.28 for 32 on 16 on the AllReduce, 7.58 for 16 on 8 and 14.29 for
// 32 on 16 on the AllToAll (32 parts alone: 25.70 and 19.46).
func BenchmarkPacketParallelCeiling(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, c := range packetCases {
			for _, p := range []int{8, 16, 32} {
				out := c.run(b, "--partitions", strconv.Itoa(p), "--threads", "1")
				ideal := idealSpeedup(b, out)
				// Half as many threads taking the parts, heaviest first.
				taken := takenSpeedup(b, out, p/2)
				fmt.Printf("packet %s, %d partitions: ideal speedup %.2f; on %d threads %.2f\n", c.name, p, ideal, p/2, taken)
				b.ReportMetric(ideal, fmt.Sprintf("ideal-%s-p%d", c.short, p))
				b.ReportMetric(taken, fmt.Sprintf("ideal-%s-p%d-t%d", c.short, p, p/2))
			}
		}
	}
}

// takenSpeedup reads from flowsim-packet's parallel summary the ideal
// speedup of t threads taking the parts heaviest first.
func takenSpeedup(b *testing.B, out string, t int) float64 {
	b.Helper()
	m := regexp.MustCompile(`taken heaviest first.*\b` + strconv.Itoa(t) + ` threads ([\d.]+)`).FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no ideal speedup on %d threads in %q", t, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// A 4096-GPU Spectrum-X H100 cluster running one direct AllToAll of
// 16 MiB per rank over all 4096 ranks: 16.8 million flows of 4 KiB, every
// one released at once (a queue pair per flow). It took 10.4 GB and 520 s.
// Its 2048-GPU half (4.2 M flows, also one packet each) went from 2.57 GB
// peak RSS to 2.05 GB with the flows read in place, step latencies waited
// out in lanes, pending queue pairs kept in their port's slot and smaller
// queue pairs (272 bytes, was 480), and lower with GOGC 20; the 1024-GPU
// one (1.05 M flows of two packets) from 1.52 GB to 0.92 GB. With the
// retransmission timeouts in a FIFO instead of the calendar's far heap
// (each finished pair's lingers for the 1 ms RTO) and ordered flow ids and
// start times no longer stored twice, the 2048-GPU run went from 1.32 GB to
// 1.12 GB peak RSS, traces unchanged, and this one peaked at 3,952,200 kB
// (3.77 GiB, 4.05e9 bytes; 537 s on a loaded machine). Dropping dead RTO
// entries once they outnumber twice the queue pairs, and pooling the
// arrays of emptied calendar buckets (each bucket had kept its own peak),
// took it to 3,291,164 kB (3.14 GiB, 3.37e9 bytes; 420 s, machine shared);
// with 240-byte queue pairs, 3,277,360 kB in 315 s on a quiet machine,
// 0 packets dropped under PFC (133 stale copies of spurious timeouts);
// with the calendar's buckets sorted once instead of kept as heaps,
// 3,268,956 kB in 279 s, the same counts.
func BenchmarkPacketScaleAllToAll4096(b *testing.B) {
	for i := 0; i < b.N; i++ {
		reportPacket(b, measure(b,
			[]string{"topogen", "--family", "spectrum-x", "--gpus", "4096"},
			[]string{"simccl-decompose", "--op", "alltoall", "--size", "16MiB", "--group", "dp", "--algo", "direct", "--transport", "preset=none"},
			[]string{"flowsim-packet", "--conf", "examples/conf/default.conf"}))
	}
}
