package serve

import (
	"testing"

	"github.com/fabricsim/fabricsim/formats/requests"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/roofline"
)

// serveRun runs reqs on fatTree16 with Llama-3-8B, one TP=1 prefill
// replica on GPU 0 and one decode replica on GPU 8 unless gpus says.
func serveRun(t *testing.T, cfg Config, reqs []Request) []requests.Row {
	t.Helper()
	tp, _ := fatTree16(t)
	cfg.Model = readExample(t, "llama-3-8b.json")
	if cfg.Roof == (Roofline{}) {
		cfg.Roof = roofline.ByGPU["H100"]
	}
	if cfg.Prefill.Count == 0 {
		cfg.Prefill = ReplicaSpec{1, 1, 1, 1}
	}
	if cfg.Decode == (ReplicaSpec{}) {
		cfg.Decode = ReplicaSpec{1, 1, 1, 1}
	}
	if cfg.GPUs == nil {
		cfg.GPUs = []int32{0, 8}
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 64
	}
	if cfg.PrefillTokens == 0 {
		cfg.PrefillTokens = 8192
	}
	rows, _, err := Run(tp, cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := requests.Check(&rows[i]); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	return rows
}

// The target: a request alone on an idle fabric moves its KV cache in
// bytes / path bottleneck + path latency. 1023 prompt tokens of
// Llama-3-8B are 128 MiB (2 x 1024 x 8 x 128 x 32 x 2); GPU 0 to GPU 8
// crosses 100 Gbps NICs and 6 links of 500 ns: 10.73741824 ms + 3 us.
func TestServeKVIdle(t *testing.T) {
	rows := serveRun(t, Config{}, []Request{{Prefill: 1023, Decode: 4}})
	r := rows[0]
	if r.KVBytes != 128<<20 {
		t.Fatalf("KV %d bytes, want 128 MiB", r.KVBytes)
	}
	want := int64(10_737_418 + 3_000) // ns, 10,740,418.24
	if got := r.KVEndNs - r.KVStartNs; got < want-1 || got > want+1 {
		t.Errorf("KV transfer %d ns, want %d", got, want)
	}
	if r.KVStartNs != r.PrefillDoneNs || r.DecodeStartNs != r.KVEndNs {
		t.Errorf("stages not back to back on an idle system: %+v", r)
	}
}

// Continuous batching: two long requests overlap on the decode replica,
// each iteration costing about the same (a decode step of Llama-3-8B on
// one H100 is bound by reading its 16 GB of weights, whatever the batch),
// so the second joins at the first iteration boundary after its KV
// arrives, while the first still runs, and takes its 100 iterations; with
// a batch of 1 it starts only when the first completes, and so it does
// when the KV cache holds 300 tokens (each request needs 201 at its end;
// 402 lets both in).
func TestServeContinuousBatching(t *testing.T) {
	reqs := []Request{{ID: 0, Prefill: 100, Decode: 101}, {ID: 1, Arrival: 20 * des.Millisecond, Prefill: 100, Decode: 101}}
	for _, c := range []struct {
		batch    int
		kv       int64
		parallel bool
	}{{64, 0, true}, {1, 0, false}, {64, 300, false}, {64, 402, true}} {
		batch := c.batch
		rows := serveRun(t, Config{MaxBatch: batch, KVTokens: c.kv}, reqs)
		a, b := rows[0], rows[1]
		iter := float64(a.CompletedNs-a.DecodeStartNs) / 100 // a's mean iteration
		if a.CompletedNs <= b.KVEndNs {
			t.Fatalf("max batch %d: the first request completed before the second's KV arrived: no overlap to test", batch)
		}
		if !c.parallel {
			if b.DecodeStartNs != a.CompletedNs {
				t.Errorf("max batch %d, KV tokens %d: the second request started decoding at %d ns, want when the first completed, %d", batch, c.kv, b.DecodeStartNs, a.CompletedNs)
			}
		} else if w := float64(b.DecodeStartNs-b.KVEndNs) / iter; w < 0 || w > 1.05 {
			t.Errorf("max batch %d: the second request waited %.2f iterations to join, want at most 1", batch, w)
		}
		if n := float64(b.CompletedNs-b.DecodeStartNs) / iter; n < 99 || n > 101 {
			t.Errorf("max batch %d: the second request decoded for %.1f iterations of the first's length, want 100", batch, n)
		}
	}
}

// A run is a function of its inputs.
func TestServeDeterministic(t *testing.T) {
	reqs, err := Synthetic{N: 40, Process: "gamma", Rate: 200, CV: 3, Prefill: Lengths{50, 3000}, Decode: Lengths{1, 60}, Seed: 9}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Prefill: ReplicaSpec{2, 2, 1, 1}, Decode: ReplicaSpec{2, 2, 1, 1}, GPUs: []int32{0, 1, 2, 3, 8, 9, 10, 11}, MaxBatch: 8}
	a := serveRun(t, cfg, reqs)
	b := serveRun(t, cfg, reqs)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("row %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// Colocated serving (no decode replicas) on GPU 0 runs the same
// iterations as disaggregated serving on GPUs 0 and 8, less the KV
// transfer: a request alone finishes exactly that much earlier.
func TestServeColocated(t *testing.T) {
	reqs := []Request{{Prefill: 1023, Decode: 50}}
	dis := serveRun(t, Config{}, reqs)[0]
	colo := serveRun(t, Config{Decode: ReplicaSpec{0, 1, 1, 1}, GPUs: []int32{0}}, reqs)[0]
	if colo.KVBytes != 0 || colo.KVEndNs != colo.PrefillDoneNs || colo.TTFTNs != dis.TTFTNs {
		t.Errorf("colocated %+v, disaggregated %+v", colo, dis)
	}
	if d := dis.CompletedNs - colo.CompletedNs - (dis.KVEndNs - dis.KVStartNs); d < -2 || d > 2 {
		t.Errorf("colocated completes %d ns earlier, want the KV transfer's %d", dis.CompletedNs-colo.CompletedNs, dis.KVEndNs-dis.KVStartNs)
	}
}

// The interference disaggregation removes: a long prompt arriving while
// a request decodes. B has one output token, so it never reaches a decode
// replica: disaggregated, A's completion does not move; colocated, the
// iteration that prefills B holds A's token back by about B's prefill.
func TestServeColocatedInterference(t *testing.T) {
	a := Request{ID: 0, Prefill: 100, Decode: 101}
	b := Request{ID: 1, Arrival: 30 * des.Millisecond, Prefill: 8000, Decode: 1}
	colo := Config{Decode: ReplicaSpec{0, 1, 1, 1}, GPUs: []int32{0}}
	aloneD := serveRun(t, Config{}, []Request{a})[0]
	withD := serveRun(t, Config{}, []Request{a, b})
	if withD[0].CompletedNs != aloneD.CompletedNs {
		t.Errorf("disaggregated: A completed at %d ns with B, %d without", withD[0].CompletedNs, aloneD.CompletedNs)
	}
	aloneC := serveRun(t, colo, []Request{a})[0]
	withC := serveRun(t, colo, []Request{a, b})
	if withC[1].ScheduledNs >= aloneC.CompletedNs {
		t.Fatal("B's prefill did not overlap A's decoding")
	}
	delay := withC[0].CompletedNs - aloneC.CompletedNs
	prefill := withD[1].PrefillDoneNs - withD[1].ScheduledNs // B's prefill alone
	if float64(delay) < 0.95*float64(prefill) || float64(delay) > 1.05*float64(prefill) {
		t.Errorf("colocated: A delayed %d ns by B, want about B's prefill, %d ns", delay, prefill)
	}
}

// Pipeline stages hand their activations on over the path between them:
// 1023 tokens x 4096 x 2 bytes = 8,380,416 bytes. Stages on GPUs 0 and 8
// (other pods: 100 Gbps, 3 us) rather than 0 and 1 (NVSwitch: 2,966.4
// Gbps, 50 ns) add 670,433.28 + 3,000 - 22,600.37 - 50 ns to the prefill.
func TestServePipelineHop(t *testing.T) {
	reqs := []Request{{Prefill: 1023, Decode: 2}}
	pp := ReplicaSpec{1, 1, 2, 1}
	near := serveRun(t, Config{Prefill: pp, GPUs: []int32{0, 1, 9}}, reqs)[0]
	far := serveRun(t, Config{Prefill: pp, GPUs: []int32{0, 8, 9}}, reqs)[0]
	want := 670_433.28 + 3_000 - 8_380_416*8/2966.4 - 50
	if d := float64(far.TTFTNs-near.TTFTNs) - want; d < -2 || d > 2 {
		t.Errorf("the cross-pod stage hop adds %d ns to TTFT, want %.0f", far.TTFTNs-near.TTFTNs, want)
	}
}

// Chunked prefill with a chunk larger than anything queued is whole-prompt
// batching, to the ns; with 512-token chunks a long prompt holds a decoding
// request back less (it shares many iterations instead of stretching one)
// and reaches its first token later (the trade Sarathi-Serve makes).
func TestServeChunkedPrefill(t *testing.T) {
	reqs, err := Synthetic{N: 60, Process: "poisson", Rate: 100, Prefill: Lengths{10, 6000}, Decode: Lengths{1, 80}, Seed: 11}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	colo := Config{Decode: ReplicaSpec{0, 1, 1, 1}, GPUs: []int32{0, 1}, Prefill: ReplicaSpec{2, 1, 1, 1}, MaxBatch: 16, PrefillTokens: 1 << 30}
	whole := serveRun(t, colo, reqs)
	colo.Chunk = 1 << 30
	chunked := serveRun(t, colo, reqs)
	for i := range whole {
		if whole[i] != chunked[i] {
			t.Fatalf("request %d: whole prompts %+v, one huge chunk %+v", i, whole[i], chunked[i])
		}
	}
	a := Request{ID: 0, Prefill: 100, Decode: 101}
	b := Request{ID: 1, Arrival: 30 * des.Millisecond, Prefill: 8000, Decode: 1}
	one := Config{Decode: ReplicaSpec{0, 1, 1, 1}, GPUs: []int32{0}}
	alone := serveRun(t, one, []Request{a})[0]
	plain := serveRun(t, one, []Request{a, b})
	one.Chunk = 512
	small := serveRun(t, one, []Request{a, b})
	if dp, ds := plain[0].CompletedNs-alone.CompletedNs, small[0].CompletedNs-alone.CompletedNs; !(ds < dp) || ds <= 0 {
		t.Errorf("A delayed %d ns by B's chunked prefill, %d by its whole prompt: want less, and some", ds, dp)
	}
	if small[1].TTFTNs <= plain[1].TTFTNs {
		t.Errorf("B's TTFT %d ns chunked, %d whole: want later", small[1].TTFTNs, plain[1].TTFTNs)
	}
}

// --pp-flows: on an idle fabric the stage hop as a flow takes what the
// formula says (bytes / bottleneck + latency), so TTFT agrees to rounding.
// Under contention it shares GPU 0's 100 Gbps uplink: A's 8,000-token
// prompt finishes prefill and its KV cache (8,001 x 131,072 bytes, half
// from each stage's GPU) leaves GPU 0 for the decode GPU 9 over that
// uplink for ~42 ms, while B (1,000 tokens, queued behind A by --max-batch
// 1) runs stage 0 and sends its 8,192,000 bytes of activations to GPU 8
// over the same uplink at half of it: 1,310.72 instead of 655.36 us, so
// B's TTFT grows by 655.36 us; A's own hop ran alone and its TTFT stays.
func TestServePipelineHopFlows(t *testing.T) {
	pp := ReplicaSpec{1, 1, 2, 1}
	gpus := []int32{0, 8, 9}
	reqs := []Request{{ID: 0, Prefill: 8000, Decode: 2}, {ID: 1, Prefill: 1000, Decode: 2}}
	formula := serveRun(t, Config{Prefill: pp, GPUs: gpus, MaxBatch: 1}, reqs)
	flows := serveRun(t, Config{Prefill: pp, GPUs: gpus, MaxBatch: 1, PPFlows: true}, reqs)
	if d := flows[0].TTFTNs - formula[0].TTFTNs; d < -2 || d > 2 {
		t.Errorf("A alone: TTFT %d ns with the hop as a flow, %d by the formula", flows[0].TTFTNs, formula[0].TTFTNs)
	}
	if flows[1].ScheduledNs != flows[0].PrefillDoneNs || flows[1].KVStartNs-flows[1].ScheduledNs > flows[0].KVEndNs-flows[0].KVStartNs {
		t.Fatalf("B's prefill does not overlap A's KV transfer: %+v %+v", flows[0], flows[1])
	}
	if d := float64(flows[1].TTFTNs-formula[1].TTFTNs) - 655_360; d < -2 || d > 2 {
		t.Errorf("B: its hop sharing GPU 0's uplink with A's KV adds %d ns to TTFT, want 655360", flows[1].TTFTNs-formula[1].TTFTNs)
	}
}
