package tests

import (
	"bytes"
	"strings"
	"testing"
)

// SimAI reads its AS_* variables in its one process, so its command line
// carried over as "AS_NVLS_ENABLE=1 topogen ... | simccl-decompose ..." sets
// them for topogen alone: SimAI's micro workload then ran as rings with
// NCCL's latencies instead of NVLS with a 3 us send latency, silently.
// topogen records them in the topology's params, and simccl-decompose
// names each one it reads that reached topogen but not itself; exported
// to both, or absent, nothing is said and topogen's stream is unchanged.
func TestSimAIEnvOnTopogenOnlySaysSo(t *testing.T) {
	t.Parallel()
	env := []string{"AS_SEND_LAT=3", "AS_NVLS_ENABLE=1"}
	wl := []string{"--workload", "examples/workloads/simai_microAllReduce.txt", "--selector", "simai", "--summary"}
	plain := mustRun(t, nil, "topogen", "--gpus", "16")
	marked := runEnv(t, env, nil, "topogen", "--gpus", "16")
	if marked.code != 0 || bytes.Equal(marked.stdout, plain) {
		t.Fatalf("topogen with %v: exit %d, stream unchanged %v", env, marked.code, bytes.Equal(marked.stdout, plain))
	}
	if again := mustRun(t, nil, "topogen", "--gpus", "16"); !bytes.Equal(again, plain) {
		t.Fatal("topogen without AS_* variables: stream differs between runs")
	}
	// Not SimAI's: it may hold anything, and the stream is a shared file.
	if other := runEnv(t, []string{"AS_API_TOKEN=s3cr3t"}, nil, "topogen", "--gpus", "16"); other.code != 0 || !bytes.Equal(other.stdout, plain) {
		t.Errorf("topogen with AS_API_TOKEN set: exit %d, stream differs from plain's %v", other.code, !bytes.Equal(other.stdout, plain))
	}
	through := mustRun(t, marked.stdout, "ncclpath")
	for _, c := range []struct {
		name   string
		env    []string
		in     []byte
		want   []string // warnings' variables
		algo   string   // the 16 MiB TP AllReduce's algorithm
		absent string
	}{
		{"on topogen only", nil, marked.stdout, []string{"AS_SEND_LAT=3", "AS_NVLS_ENABLE=1"}, "ring", ""},
		{"on topogen only, through ncclpath", nil, through, []string{"AS_SEND_LAT=3", "AS_NVLS_ENABLE=1"}, "ring", ""},
		{"exported", env, marked.stdout, nil, "nvls", "reached topogen"},
		{"on simccl-decompose only", env, plain, nil, "nvls", "reached topogen"},
		{"half exported", env[:1], marked.stdout, []string{"AS_NVLS_ENABLE=1"}, "ring", "AS_SEND_LAT=3 reached"},
	} {
		r := runEnv(t, c.env, c.in, "simccl-decompose", wl...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, r.code, r.stderr)
		}
		for _, v := range c.want {
			if !bytes.Contains(r.stderr, []byte("warning: "+v+" reached topogen")) {
				t.Errorf("%s: no warning naming %s: %s", c.name, v, r.stderr)
			}
		}
		if c.absent != "" && bytes.Contains(r.stderr, []byte(c.absent)) {
			t.Errorf("%s: warns %q: %s", c.name, c.absent, r.stderr)
		}
		if line := summaryRow(r.stdout, "16MiB"); !strings.Contains(line, " "+c.algo+" ") {
			t.Errorf("%s: 16 MiB AllReduce runs %q, want %s", c.name, line, c.algo)
		}
	}
}

// summaryRow is the first line of a --summary table holding field.
func summaryRow(out []byte, field string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, " "+field+" ") {
			return l
		}
	}
	return ""
}
