package tests

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

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
