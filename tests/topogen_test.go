package tests

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

func readTopology(t *testing.T, data []byte) *topo.Topology {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(data), "topogen")
	if err != nil {
		t.Fatal(err)
	}
	var top *topo.Topology
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if kind == stream.KindTopology {
			if top, err = r.Topology(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r.Header.Producer == "" || top == nil {
		t.Fatal("no producer or no topology")
	}
	return top
}

func TestTopogenStream(t *testing.T) {
	out := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	top := readTopology(t, out)
	if err := topo.Validate(top); err != nil {
		t.Fatal(err)
	}
	if top.GPUs != 128 || top.GPUType != "A100" || top.Params["nic_bw"] != "100Gbps" || top.Params["nvlink_bw"] != "1920Gbps" {
		t.Fatalf("topology %d GPUs %s params %v", top.GPUs, top.GPUType, top.Params)
	}
}

// SimAI compatibility: our export of SimAI's 16-GPU example equals the file
// its generator wrote, and importing then exporting it changes nothing.
func TestTopogenSimAI(t *testing.T) {
	ref, err := os.ReadFile("../examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100")
	if err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--nvlink-bw", "2880Gbps", "--format", "simai"); !bytes.Equal(out, ref) {
		t.Fatal("generated SimAI file differs from SimAI's")
	}
	if out := mustRun(t, nil, "topogen", "--from-simai", "examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100", "--format", "simai"); !bytes.Equal(out, ref) {
		t.Fatal("import/export changed the file")
	}
	top := readTopology(t, mustRun(t, nil, "topogen", "--from-simai", "examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100"))
	if top.GPUs != 16 || len(top.Links) != 544 {
		t.Fatalf("imported %d GPUs, %d links", top.GPUs, len(top.Links))
	}
}

func TestTopogenSummary(t *testing.T) {
	out := string(mustRun(t, nil, "topogen", "--family", "hpn-dual-plane", "--gpus", "1024", "--summary"))
	for _, want := range []string{"hpn-dual-plane", "1024 gpu, 128 nvswitch, 16 asw, 120 psw", "2048 nic", "diameter      4 hops", "bisection"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// --gpus-per-segment sizes segments: 1024 GPUs in segments of 256 (32
// servers) on Spectrum-X make 4 segments of 8 rail leaves.
func TestTopogenGPUsPerSegment(t *testing.T) {
	out := string(mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "1024", "--gpus-per-segment", "256", "--summary"))
	if !strings.Contains(out, "32 asw") {
		t.Fatalf("summary:\n%s", out)
	}
	oneLineError(t, run(t, nil, "topogen", "--gpus-per-segment", "12"), 1, "not a whole number of servers")
}

func TestTopogenErrors(t *testing.T) {
	oneLineError(t, run(t, nil, "topogen", "--gpus", "12"), 1, "topogen:", "not a multiple of --gpus-per-server 8")
	oneLineError(t, run(t, nil, "topogen", "--family", "torus"), 1, "unknown family \"torus\"")
	oneLineError(t, run(t, nil, "topogen", "--gpu-type", "V100"), 1, "unknown GPU type")
	oneLineError(t, run(t, nil, "topogen", "--nic-bw", "0Gbps"), 1, "bad bandwidth \"0Gbps\"")
	oneLineError(t, run(t, nil, "topogen", "--nic-bw", "fast"), 1, "bad bandwidth \"fast\"")
	oneLineError(t, run(t, nil, "topogen", "--no-such-flag"), 2, "unknown flag")
	bad := t.TempDir() + "/bad.topo"
	os.WriteFile(bad, []byte("20 8 2 2 1 H100\n16 17 18 19 \n0 16 2880Gbps 25 0\n"), 0o644)
	oneLineError(t, run(t, nil, "topogen", "--from-simai", bad), 1, "bad.topo: line 3, field latency")
	// Where SimAI's generator gives up, topogen derives counts and says so.
	r := run(t, nil, "topogen", "--family", "dcn-single-tor", "--gpus", "1024", "--summary")
	if r.code != 0 || !strings.Contains(string(r.stderr), "note:") || !strings.Contains(string(r.stdout), "16 asw") {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
}

// runBounded runs a program like run, killing it after limit. (Its peak
// memory is not measured here: the kernel charges a child the test
// process's own peak at exec; pkg/topo's tests bound the allocations.)
func runBounded(t *testing.T, limit time.Duration, prog string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, prog), args...)
	cmd.Dir = ".."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after %v", prog, strings.Join(args, " "), limit)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	return result{out.Bytes(), errb.Bytes(), code, 0}
}

// Fabrics beyond topogen's limits (131,072 GPUs, 16,384 network switches,
// 2,097,152 links) are refused up front, naming what they would build;
// before, each of these allocated without bound (--gpus 10000000 ran out
// of memory in the diameter computation after 32 s).
func TestTopogenSizeLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--gpus", "10000000"}, []string{"--gpus 10000000", "limit of 131072 GPUs"}},
		{[]string{"--family", "fat-tree", "--fat-tree-k", "100000"}, []string{"k=100000 fat-tree", "250000000000000 GPUs", "12500000000 network switches", "1e+15 links"}},
		{[]string{"--family", "fat-tree", "--oversubscription", "1e9"}, []string{"1e+09:1", "16000000000 GPUs"}},
		{[]string{"--family", "fat-tree", "--fat-tree-k", "8", "--oversubscription", "1e9"}, []string{"k=8 fat-tree at 1e+09:1", "128000000000 GPUs"}},
		{[]string{"--family", "dragonfly", "--routers-per-group", "100000", "--terminals-per-router", "2", "--global-per-router", "2"},
			[]string{"groups of 100000 routers", "200000 network switches"}},
		{[]string{"--family", "dragonfly", "--gpus", "64", "--routers-per-group", "8", "--terminals-per-router", "4", "--global-per-router", "4", "--groups", "1000000000"},
			[]string{"1000000000 groups", "8000000000 network switches"}},
		{[]string{"--family", "dcn-single-tor", "--gpus", "131072", "--nics-per-asw", "1"}, []string{"131080 network switches"}},
		{[]string{"--gpus", "131072", "--nvswitches-per-server", "16"}, []string{"262144 NVSwitches", "2359296 links"}},
		{[]string{"--psw", "1000000"}, []string{"--psw 1000000", "limit of 16384 network switches"}},
	}
	for _, c := range cases {
		r := runBounded(t, 10*time.Second, "topogen", append(c.args, "--summary")...)
		oneLineError(t, r, 1, append([]string{"topogen:"}, c.want...)...)
	}
	// At the limit every family builds, and the summary's diameter and
	// bisection stay within seconds (5.6 s and 700 MB before the diameter
	// grouped GPUs by their leaves).
	for _, fam := range []string{"spectrum-x", "fat-tree"} {
		r := runBounded(t, 20*time.Second, "topogen", "--family", fam, "--gpus", "131072", "--summary")
		if r.code != 0 {
			t.Fatalf("%s at 131072 GPUs: exit %d: %s", fam, r.code, r.stderr)
		}
		want := map[string]string{"spectrum-x": "diameter      4 hops", "fat-tree": "diameter      6 hops"}[fam]
		if !strings.Contains(string(r.stdout), want) {
			t.Errorf("%s at 131072 GPUs: summary lacks %q:\n%s", fam, want, r.stdout)
		}
	}
}

// Link bandwidths outside 10 Mbps to 1000 Tbps and latencies above 1 s are
// refused on input, from flags and from SimAI files: --nic-bw 1e-30Gbps ran
// to a trace with negative ideal FCTs, which fctstats then rejected. At the
// ends of the range a cross-server AllReduce runs through to fctstats.
func TestTopogenLinkRanges(t *testing.T) {
	oneLineError(t, run(t, nil, "topogen", "--nic-bw", "1e-30Gbps"), 1, "topogen: --nic-bw: 1e-21 bit/s is outside 10Mbps to 1000Tbps")
	oneLineError(t, run(t, nil, "topogen", "--switch-bw", "1e30Gbps"), 1, "--switch-bw: 1e+39 bit/s is outside")
	oneLineError(t, run(t, nil, "topogen", "--nvlink-bw", "9Mbps"), 1, "--nvlink-bw: 9e+06 bit/s is outside")
	oneLineError(t, run(t, nil, "topogen", "--nic-latency", "2s"), 1, "--nic-latency: 2s is outside 0 to 1s")
	oneLineError(t, run(t, nil, "topogen", "--switch-latency", "1000000s"), 1, "--switch-latency: 1000000s is outside 0 to 1s")
	bad := t.TempDir() + "/slow.topo"
	os.WriteFile(bad, []byte("20 8 2 2 1 H100\n16 17 18 19 \n0 16 1e-30Gbps 0.000025ms 0\n"), 0o644)
	oneLineError(t, run(t, nil, "topogen", "--from-simai", bad), 1, "slow.topo: line 3, field bandwidth: 1e-21 bit/s is outside")
	os.WriteFile(bad, []byte("20 8 2 2 1 H100\n16 17 18 19 \n0 16 400Gbps 5000ms 0\n"), 0o644)
	oneLineError(t, run(t, nil, "topogen", "--from-simai", bad), 1, "slow.topo: line 3, field latency: 5s is outside 0 to 1s")

	for _, edge := range [][]string{{"--nic-bw", "10Mbps", "--nic-latency", "1s"}, {"--nic-bw", "1000Tbps", "--switch-bw", "1000Tbps", "--nic-latency", "0ns"}} {
		topology := mustRun(t, nil, "topogen", append([]string{"--gpus", "16"}, edge...)...)
		flows := mustRun(t, topology, "simccl-decompose", "--op", "allreduce", "--size", "1GiB", "--group", "dp", "--tp", "8")
		tr := mustRun(t, flows, "flowsim-analytical")
		rows, _ := readTrace(t, tr)
		for _, r := range rows {
			if r.IdealFctNs < 0 || r.FctNs < 0 || r.EndNs < r.StartNs {
				t.Fatalf("%v: flow %d: fct %d ns, ideal %d ns, %d..%d", edge, r.FlowID, r.FctNs, r.IdealFctNs, r.StartNs, r.EndNs)
			}
		}
		mustRun(t, tr, "fctstats")
	}
}

// 0 never silently means "default": a count flag given as 0 is refused
// (--gpus 0 built 4096 GPUs, --psw 0 64 spines, --oversubscription 0 a
// non-blocking tree), while a 0ns latency builds links without latency
// (--nic-latency 0ns built 500 ns links). A bandwidth needs its unit, as a
// time does: --nic-bw 400 built 400 bit/s NICs.
func TestTopogenZeroIsNotDefault(t *testing.T) {
	for _, args := range [][]string{
		{"--gpus", "0"}, {"--psw", "0"}, {"--nics-per-asw", "0"}, {"--asw-per-psw", "0"}, {"--gpus-per-segment", "0"},
		{"--family", "fat-tree", "--fat-tree-k", "0"}, {"--family", "dragonfly", "--routers-per-group", "0"},
		{"--family", "dragonfly", "--groups", "0"},
	} {
		oneLineError(t, run(t, nil, "topogen", args...), 1, "topogen: "+args[len(args)-2]+" "+args[len(args)-1]+" must be positive (leave it out for the default)")
	}
	oneLineError(t, run(t, nil, "topogen", "--gpus=-8"), 1, "--gpus -8 must be positive")
	oneLineError(t, run(t, nil, "topogen", "--family", "fat-tree", "--oversubscription", "0"), 1, "--oversubscription 0 must be at least 1")
	oneLineError(t, run(t, nil, "topogen", "--nvswitches-per-server", "0"), 1, "--nvswitches-per-server 0: the 8 GPUs of a server reach each other through an NVSwitch")
	oneLineError(t, run(t, nil, "topogen", "--nic-bw", "400"), 1, `bad bandwidth "400": missing unit (400bps would be bit/s; use e.g. 400Gbps or 50GB/s)`)
	oneLineError(t, run(t, nil, "topogen", "--switch-bw", "1e11"), 1, "missing unit")

	// Latencies of 0ns are kept; left out, they are the documented defaults.
	for _, c := range []struct {
		args []string
		want map[string]int64
	}{
		{nil, map[string]int64{stream.LinkNVLink: 25_000, stream.LinkNIC: 500_000, stream.LinkFabric: 500_000}},
		{[]string{"--nic-latency", "0ns"}, map[string]int64{stream.LinkNVLink: 25_000, stream.LinkNIC: 0, stream.LinkFabric: 500_000}},
		{[]string{"--nvlink-latency", "0ns", "--switch-latency", "0ns", "--nic-latency", "0ns"}, map[string]int64{stream.LinkNVLink: 0, stream.LinkNIC: 0, stream.LinkFabric: 0}},
	} {
		top := readTopology(t, mustRun(t, nil, "topogen", append([]string{"--gpus", "16"}, c.args...)...))
		for _, l := range top.Links {
			if l.LatencyPs != c.want[l.Kind] {
				t.Fatalf("%v: %s link %d-%d has %d ps, want %d", c.args, l.Kind, l.A, l.B, l.LatencyPs, c.want[l.Kind])
			}
		}
	}
	// --nvswitches-per-server 0 is what a server of one GPU has.
	if top := readTopology(t, mustRun(t, nil, "topogen", "--gpus", "16", "--gpus-per-server", "1", "--nvswitches-per-server", "0")); top.NVSwitchesPerServer != 0 {
		t.Fatalf("one GPU per server: %d NVSwitches", top.NVSwitchesPerServer)
	}
}

// --oversubscribe-by uplinks keeps k/2 GPU NICs per edge switch and thins
// its uplinks, so 1:1 and 4:1 compare like for like; hosts, the default,
// builds what topogen always built. Bad modes and other families are
// refused as the other fat-tree flags are.
func TestTopogenOversubscribeBy(t *testing.T) {
	ft := []string{"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "1024", "--oversubscription", "4"}
	top := readTopology(t, mustRun(t, nil, "topogen", append(ft, "--oversubscribe-by", "uplinks")...))
	fabric := 0
	for _, l := range top.Links {
		if l.Kind == stream.LinkFabric {
			fabric++
		}
	}
	// 128 edges x 2 uplinks + 128 aggs x 8 cores.
	if fabric != 128*2+128*8 || top.Params["oversubscribe_by"] != "uplinks" || top.Params["uplinks_per_edge"] != "2" || top.Params["gpus_per_edge"] != "8" {
		t.Fatalf("%d fabric links, params %v", fabric, top.Params)
	}
	sum := string(mustRun(t, nil, "topogen", append(ft, "--oversubscribe-by", "uplinks", "--summary")...))
	for _, want := range []string{"fat-tree      k=16, 4:1 asked, oversubscribed by uplinks: 8 GPU NICs and 2 uplinks per edge switch",
		"tier edge     128 switches, 409.6 Tbps down, 102.4 Tbps up, oversub 4:1\n  per switch  8 GPU NICs, 2 up\n", "tier agg      128 switches (32 with GPUs)", "bisection     51.2 Tbps"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	sum = string(mustRun(t, nil, "topogen", append(ft, "--summary")...))
	if !strings.Contains(sum, "oversubscribed by hosts: 32 GPU NICs and 8 uplinks") || !strings.Contains(sum, "tier edge     128 switches (32 with GPUs), 409.6 Tbps down, 102.4 Tbps up, oversub 4:1") {
		t.Errorf("hosts summary:\n%s", sum)
	}
	if a, b := mustRun(t, nil, "topogen", ft...), mustRun(t, nil, "topogen", append(ft, "--oversubscribe-by", "hosts")...); !bytes.Equal(a, b) {
		t.Error("--oversubscribe-by hosts differs from the default")
	}
	r := run(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--oversubscription", "3", "--oversubscribe-by", "uplinks", "--summary")
	if r.code != 0 || !strings.Contains(string(r.stderr), "note: --oversubscription 3 by uplinks: each edge switch of the k=16 fat-tree keeps 8 GPU NICs and gets 3 uplinks (round(8/3), at least 1), a real ratio of 2.67:1") {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
	oneLineError(t, run(t, nil, "topogen", "--family", "fat-tree", "--oversubscribe-by", "links"), 1, `topogen: --oversubscribe-by "links" must be hosts or uplinks`)
	oneLineError(t, run(t, nil, "topogen", "--family", "fat-tree", "--oversubscribe-by", ""), 1, `--oversubscribe-by "" must be hosts or uplinks`)
	oneLineError(t, run(t, nil, "topogen", "--family", "spectrum-x", "--oversubscribe-by", "uplinks"), 2, "topogen: --oversubscribe-by applies to fat-tree, not --family spectrum-x")
	oneLineError(t, run(t, nil, "topogen", "--family", "dragonfly", "--oversubscribe-by", "hosts"), 2, "--oversubscribe-by applies to fat-tree, not --family dragonfly")
}

// --nic-network is recorded in the topology's params (generated or
// imported from SimAI's file, which does not say), shown by --summary, and
// refused with one line when it names no network or the output is SimAI's
// text format, which cannot carry it.
func TestTopogenNICNetwork(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--gpus", "16"}, {"--from-simai", "examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100"}} {
		top := readTopology(t, mustRun(t, nil, "topogen", append(args, "--nic-network", "efa")...))
		if top.Params["nic_network"] != "efa" {
			t.Errorf("%v: params %v, want nic_network efa", args, top.Params)
		}
		if top := readTopology(t, mustRun(t, nil, "topogen", args...)); top.Params["nic_network"] != "" {
			t.Errorf("%v without --nic-network: params %v", args, top.Params)
		}
	}
	if sum := string(mustRun(t, nil, "topogen", "--gpus", "16", "--nic-network", "roce", "--summary")); !strings.Contains(sum, "NICs per GPU  1 (RoCE)") {
		t.Errorf("summary:\n%s", sum)
	}
	oneLineError(t, run(t, nil, "topogen", "--nic-network", "efa", "--format", "simai"), 2, "--nic-network: SimAI's text topology cannot carry it")
	oneLineError(t, run(t, nil, "topogen", "--nic-network", "rocev2"), 1, `topogen: --nic-network "rocev2" must be one of ib, roce, efa`)
	oneLineError(t, run(t, nil, "topogen", "--nic-network", ""), 1, `topogen: --nic-network "" must be one of ib, roce, efa`)
	oneLineError(t, run(t, nil, "topogen", "--from-simai", "examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100", "--nic-network", "eth"), 1, `--nic-network "eth" must be one of`)
}
