package tests

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
)

const chakraData = "tests/testdata/chakra"

// Every ASTRA-sim microbenchmark reads and runs through fluid: the trace
// holds the folder's collective of 1 MiB on all of its ranks, and the
// wire carries what the op's data movement needs at least.
func TestChakraMicrobenchmarks(t *testing.T) {
	ops := map[string]string{"all_reduce": "allreduce", "all_gather": "allgather", "all_to_all": "alltoall", "reduce_scatter": "reducescatter"}
	for dir, op := range ops {
		for _, n := range []int{4, 8, 16} {
			topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", strconv.Itoa(n), "--gpus-per-server", "1")
			st := mustRun(t, topo, "simccl-decompose", "--chakra", filepath.Join(chakraData, "microbenchmarks", dir, strconv.Itoa(n)+"npus_1MB", dir))
			rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
			var wire int64
			for _, r := range rows {
				if r.SizeBytes > 0 && (r.Op != op || r.CollSizeBytes != 1<<20 || int(r.NRanks) != n) {
					t.Fatalf("%s/%d: row %+v", dir, n, r)
				}
				wire += r.SizeBytes
			}
			// Each rank sends at least (n-1)/n of the buffer (a reduction
			// twice that, an all-to-all (n-1)/n of its own buffer).
			min := int64(n-1) * (1 << 20)
			if op == "allreduce" {
				min *= 2
			}
			if wire < min {
				t.Errorf("%s/%d: %d bytes on the wire, at least %d", dir, n, wire, min)
			}
		}
	}
}

// The 8-NPU ring AllReduce of 1 MiB on 50 GB/s links of 500 ns, GPU to
// switch to GPU (a fat tree whose edge switch holds all 8: two links, 1 us
// a hop), against the ring's closed form: 2(n-1) steps of size/n at the
// link rate plus a hop's latency, 2(n-1)/n x size / bw + 2(n-1) x 1 us.
// ASTRA-sim's custom ring (send/recv with a 7 us reduction after each of
// the 7 reduce-scatter receives) adds 7 x 7 us.
func TestChakraRingClosedForm(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "8", "--gpus-per-server", "1",
		"--nic-bw", "400Gbps", "--nic-latency", "500ns")
	const n, size, bw, hop = 8, 1 << 20, 50e9, 1e-6
	ring := 2 * (n - 1) * (size/n/bw + hop) * 1e9 // ns
	for _, tc := range []struct {
		name string
		args []string
		want float64
	}{
		{"microbenchmark ring", []string{"--chakra", filepath.Join(chakraData, "microbenchmarks/all_reduce/8npus_1MB/all_reduce"),
			"--algo", "ring", "--proto", "simple", "--channels", "1", "--max-chunks", "1"}, ring},
		{"custom send/recv ring", []string{"--chakra", filepath.Join(chakraData, "custom_ring_allreduce_8npus_1MB/custom_allreduce")}, ring + 7*7e3},
	} {
		st := mustRun(t, topo, "simccl-decompose", append(tc.args, "--no-launch-latency")...)
		rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
		var end int64
		for _, r := range rows {
			end = max(end, r.EndNs)
		}
		if math.Abs(float64(end)-tc.want) > 1 {
			t.Errorf("%s: %d ns, closed form %.1f ns", tc.name, end, tc.want)
		}
	}
}

// Chakra's feeder trace (one rank): its 3,664 nodes run as 3,664 delay
// nodes (COMP, CPU-side COMM_COLL, and 1-rank collectives as joins). What
// was left out (dropped dependencies, CPU-side collectives) reaches the
// trace's metadata and every fctstats report, as the stderr notes say.
func TestChakraFeederTrace(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "4", "--gpus-per-server", "1")
	r := run(t, topo, "simccl-decompose", "--chakra", filepath.Join(chakraData, "chakra"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	tr := mustRun(t, r.stdout, "flowsim-analytical")
	rows, meta := readTrace(t, tr)
	if len(rows) != 3664 {
		t.Fatalf("%d rows, want 3664", len(rows))
	}
	if len(meta.Notes) != 3 {
		t.Fatalf("notes %q, want the 3 of simccl-decompose", meta.Notes)
	}
	report := string(mustRun(t, tr, "fctstats"))
	for _, n := range meta.Notes {
		text := strings.TrimPrefix(n, "simccl-decompose: ")
		if !strings.Contains(string(r.stderr), "simccl-decompose: note: "+text+"\n") {
			t.Errorf("note %q is not on stderr: %s", text, r.stderr)
		}
		if !strings.Contains(report, "NOTE (from the stream): "+n+"\n") {
			t.Errorf("note %q is not in fctstats' report", n)
		}
	}
	if !strings.Contains(meta.Notes[1], "554 ctrl_deps name a node later in their file: dropped") {
		t.Errorf("notes %q", meta.Notes)
	}
}

// A workload through Chakra and back gives the same flows.
func TestChakraRoundTripCLI(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	w := "examples/workloads/pipeline_pp4_ga8.txt"
	direct := readDAG(t, mustRun(t, topo, "simccl-decompose", "--workload", w))
	prefix := filepath.Join(t.TempDir(), "pp")
	mustRun(t, topo, "simccl-decompose", "--workload", w, "--format", "chakra", "--out", prefix)
	back := readDAG(t, mustRun(t, topo, "simccl-decompose", "--chakra", prefix, "--comm-groups", prefix+".comm_groups.json"))
	if !reflect.DeepEqual(direct.flows, back.flows) || len(direct.colls) != len(back.colls) || len(direct.groups) != len(back.groups) {
		t.Fatalf("round trip: %d flows, %d collectives, %d groups; direct %d, %d, %d",
			len(back.flows), len(back.colls), len(back.groups), len(direct.flows), len(direct.colls), len(direct.groups))
	}
}

// Bad input exits 1 with one line naming the file, the record and the field.
func TestChakraBadInput(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "4", "--gpus-per-server", "1")
	dir := t.TempDir()
	src := filepath.Join("..", chakraData, "microbenchmarks/all_reduce/4npus_1MB")
	for r := range 4 {
		b, err := os.ReadFile(filepath.Join(src, "all_reduce."+strconv.Itoa(r)+".et"))
		if err != nil {
			t.Fatal(err)
		}
		if r == 2 {
			b = b[:len(b)-3]
		}
		os.WriteFile(filepath.Join(dir, "trunc."+strconv.Itoa(r)+".et"), b, 0o644)
	}
	oneLineError(t, run(t, topo, "simccl-decompose", "--chakra", filepath.Join(dir, "trunc")), 1, "trunc.2.et: record 1", "field Node", "truncated")
	groups := filepath.Join(dir, "g.json")
	os.WriteFile(groups, []byte(`{"1":[0,1]}`), 0o644)
	// A pg_name the group file does not hold.
	for r := range 2 {
		f, err := os.Create(filepath.Join(dir, "pg."+strconv.Itoa(r)+".et"))
		if err != nil {
			t.Fatal(err)
		}
		w := chakra.NewWriter(f, "0.0.4")
		w.Node(&etpb.Node{Id: 5, Type: etpb.NodeType_COMM_COLL_NODE, Attr: []*etpb.AttributeProto{
			chakra.Int("comm_type", 0), chakra.Uint("comm_size", 4096), chakra.Str("pg_name", "7")}})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	oneLineError(t, run(t, topo, "simccl-decompose", "--chakra", filepath.Join(dir, "pg"), "--comm-groups", groups), 1,
		"pg.0.et: record 1 (node id 5), field attr pg_name", `group "7" is not in`)
	// A node type Chakra does not define.
	f, err := os.Create(filepath.Join(dir, "typ.0.et"))
	if err != nil {
		t.Fatal(err)
	}
	w := chakra.NewWriter(f, "0.0.4")
	w.Node(&etpb.Node{Id: 3, Type: etpb.NodeType_COMP_NODE, DurationMicros: 2})
	w.Node(&etpb.Node{Id: 4, Type: 12, CtrlDeps: []uint64{3}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	oneLineError(t, run(t, topo, "simccl-decompose", "--chakra", filepath.Join(dir, "typ")), 1, "typ.0.et: record 2 (node id 4), field type", "node type 12")
	oneLineError(t, run(t, topo, "simccl-decompose", "--chakra", filepath.Join(dir, "pg"), "--granularity", "collective"), 2, "--granularity flow only")
}

// A collective-granularity stream written as Chakra and read back at flow
// granularity gives the flows the workload gives directly (the same
// transfers and delays, whatever their order) and the same simulated
// time: the pipeline (send/receive pairs on every PP group), collectives
// on groups and their siblings, and a sweep's barriers.
func TestChakraFromCollectiveStream(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	type key struct {
		src, dst   int32
		size       int64
		conn       string
		delay      int64
		chunkCount int32
	}
	bag := func(d *dagStream) map[key]int {
		m := map[key]int{}
		for _, f := range d.flows {
			m[key{f.Src, f.Dst, f.Size, f.ConnType, f.DelayPs, f.ChunkCount}]++
		}
		return m
	}
	for _, args := range [][]string{
		{"--workload", "examples/workloads/pipeline_pp4_ga8.txt"},
		{"--workload", "examples/workloads/micro_allreduce.txt", "--tp", "4", "--ep", "2"},
		{"--op", "allreduce", "--sweep", "1MiB:4MiB:2", "--group", "dp", "--tp", "4"},
	} {
		direct := mustRun(t, topo, "simccl-decompose", args...)
		coll := mustRun(t, topo, "simccl-decompose", append(args, "--granularity", "collective")...)
		prefix := filepath.Join(t.TempDir(), "s")
		mustRun(t, coll, "simccl-decompose", "--format", "chakra", "--out", prefix)
		back := mustRun(t, topo, "simccl-decompose", "--chakra", prefix, "--comm-groups", prefix+".comm_groups.json")
		d, b := readDAG(t, direct), readDAG(t, back)
		if len(d.flows) != len(b.flows) || !reflect.DeepEqual(bag(d), bag(b)) || len(d.colls) != len(b.colls) {
			t.Errorf("%v: %d flows, %d collectives back; %d, %d direct (or other flows)", args, len(b.flows), len(b.colls), len(d.flows), len(d.colls))
			continue
		}
		sd := span(t, mustRun(t, direct, "flowsim-analytical", "--model", "fluid"))
		sb := span(t, mustRun(t, back, "flowsim-analytical", "--model", "fluid"))
		if sd != sb {
			t.Errorf("%v: %d ns back, %d ns direct", args, sb, sd)
		}
	}
	oneLineError(t, run(t, mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--size", "1MiB"), "simccl-decompose", "--format", "chakra", "--out", filepath.Join(t.TempDir(), "f")),
		1, "field conn_type", "flow-granularity stream")
	// A job placed on GPUs 16..31 has no Chakra ranks 0..15.
	topo32 := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32")
	placed := mustRun(t, topo32, "simccl-decompose", "--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--granularity", "collective", "--place", "16-31")
	oneLineError(t, run(t, placed, "simccl-decompose", "--format", "chakra", "--out", filepath.Join(t.TempDir(), "p")), 1, "field ranks", "--place")
}

// GATHER and SCATTER run as nccl-tests runs them, grouped send/receive
// between the root (the group's first rank) and every other rank, each a
// piece of comm_size / n: on a star of 50 GB/s, 500 ns links the n-1
// pieces share the root's link, (n-1) x piece / bw plus a path of two
// links (1 us).
func TestChakraGatherScatterClosedForm(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "8", "--gpus-per-server", "1",
		"--nic-bw", "400Gbps", "--nic-latency", "500ns")
	const n, size, bw, path = 8, 1 << 20, 50e9, 1e-6
	want := ((n-1)*(size/n)/bw + path) * 1e9 // ns
	dir := t.TempDir()
	for _, ct := range []etpb.CollectiveCommType{etpb.CollectiveCommType_GATHER, etpb.CollectiveCommType_SCATTER} {
		prefix := filepath.Join(dir, ct.String())
		for r := range n {
			f, err := os.Create(chakra.RankFile(prefix, r))
			if err != nil {
				t.Fatal(err)
			}
			w := chakra.NewWriter(f, "0.0.4")
			w.Node(&etpb.Node{Id: 1, Name: "g", Type: etpb.NodeType_COMM_COLL_NODE, Attr: []*etpb.AttributeProto{
				chakra.Int("comm_type", int64(ct)), chakra.Int("comm_size", size)}})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		st := mustRun(t, topo, "simccl-decompose", "--chakra", prefix, "--no-launch-latency")
		rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
		var end, bytes int64
		transfers := 0
		for _, r := range rows {
			end = max(end, r.EndNs)
			if r.SizeBytes > 0 {
				transfers++
				bytes += r.SizeBytes
				if to := r.Dst == 0; to != (ct == etpb.CollectiveCommType_GATHER) || (r.Src != 0 && r.Dst != 0) {
					t.Errorf("%s: a transfer from %d to %d", ct, r.Src, r.Dst)
				}
			}
		}
		if transfers != n-1 || bytes != (n-1)*size/n {
			t.Errorf("%s: %d transfers of %d bytes, want %d of %d", ct, transfers, bytes, n-1, (n-1)*size/n)
		}
		if math.Abs(float64(end)-want) > 1 {
			t.Errorf("%s: %d ns, closed form %.1f ns", ct, end, want)
		}
	}
}

// A COMP node without a duration takes the roofline's time, ASTRA-sim's
// max(num_ops / peak, tensor_size / bandwidth), with the topology's GPU's
// figures or the flags', and a note says how many did. By hand: 989e9
// FLOPs on 1 GB take 1 ms on an H100 (989 TFLOP/s; the memory's 298.5 us
// hide under it), 2 ms with a peak of 494.5 TFLOP/s; on an A100 (312
// TFLOP/s, 2039 GB/s) 3.17 ms.
func TestChakraRoofline(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "roof")
	f, err := os.Create(chakra.RankFile(prefix, 0))
	if err != nil {
		t.Fatal(err)
	}
	w := chakra.NewWriter(f, "0.0.4")
	w.Node(&etpb.Node{Id: 1, Name: "gemm", Type: etpb.NodeType_COMP_NODE, Attr: []*etpb.AttributeProto{
		chakra.Uint("num_ops", 989e9), chakra.Int("tensor_size", 1e9)}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		gpu  string
		args []string
		want int64 // ns
	}{
		{"H100", nil, 1e6},
		{"H100", []string{"--peak-tflops", "494.5"}, 2e6},
		{"A100", nil, int64(math.Round(989e9 / 312e12 * 1e9))},
	} {
		topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "4", "--gpus-per-server", "1", "--gpu-type", tc.gpu)
		r := run(t, topo, "simccl-decompose", append([]string{"--chakra", prefix}, tc.args...)...)
		if r.code != 0 || !strings.Contains(string(r.stderr), "note: 1 COMP nodes have no duration: they take the roofline's time") {
			t.Fatalf("%s %v: exit %d, stderr %s", tc.gpu, tc.args, r.code, r.stderr)
		}
		rows, _ := readTrace(t, mustRun(t, r.stdout, "flowsim-analytical"))
		if len(rows) != 1 || math.Abs(float64(rows[0].EndNs-rows[0].StartNs-tc.want)) > 1 {
			t.Errorf("%s %v: rows %+v, want one of %d ns", tc.gpu, tc.args, rows, tc.want)
		}
	}
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "4", "--gpus-per-server", "1")
	oneLineError(t, run(t, topo, "simccl-decompose", "--chakra", prefix, "--peak-tflops", "0"), 1, "roof.0.et: record 1 (node id 1), field duration_micros", "--peak-tflops 0")
}

// A job mix that holds the feeder trace is as incomplete as the trace:
// simccl-decompose --merge keeps its notes, each naming the job, and the
// mix's trace carries them (the merge used to drop them, so the mix's
// report said nothing of the 1,277 dependencies dropped).
func TestMergeKeepsNotes(t *testing.T) {
	dir := t.TempDir()
	topo := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "4", "--gpus-per-server", "1")
	feeder := filepath.Join(dir, "feeder.stream")
	mustRun(t, topo, "simccl-decompose", "--chakra", filepath.Join(chakraData, "chakra"), "-o", feeder)
	other := filepath.Join(dir, "b.stream")
	mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "1", "--dp", "2", "--place", "2-3", "--job", "b", "-o", other)
	_, meta := readTrace(t, mustRun(t, mustRun(t, nil, "simccl-decompose", "--merge", feeder+","+other), "flowsim-analytical"))
	if len(meta.Notes) != 3 {
		t.Fatalf("notes %q, want the feeder's 3", meta.Notes)
	}
	for _, n := range meta.Notes {
		if !strings.HasPrefix(n, "simccl-decompose: job feeder: ") {
			t.Errorf("note %q does not name the job", n)
		}
	}
}
