// Command simccl-serve simulates LLM inference serving on a fabric:
// requests prefilled on prefill replicas, their KV caches moved to decode
// replicas as flows sharing the fabric max-min fairly, decoded under
// continuous batching; it writes one Parquet row per request.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fabricsim/fabricsim/formats/requests"
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/outfile"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/roofline"
	"github.com/fabricsim/fabricsim/pkg/serve"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	progress.Quiet
	Model          string          `required:"" placeholder:"FILE.json" help:"The model: a JSON file of layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, experts, top_k, dtype_bytes (examples/models/)."`
	Trace          string          `placeholder:"FILE.csv" help:"Request trace: CSV with arrived_at (s), num_prefill_tokens, num_decode_tokens (Vidur/SimAI), or the Azure LLM inference trace's TIMESTAMP, ContextTokens, GeneratedTokens. Without it, requests are generated (--requests, --arrivals, --rate, --prompt-tokens, --output-tokens)."`
	Requests       int             `default:"100" help:"Generated trace: number of requests."`
	Arrivals       string          `default:"poisson" enum:"poisson,gamma,fixed" help:"Generated trace: arrival process (poisson, gamma with --cv, fixed gaps)."`
	Rate           float64         `default:"10" help:"Generated trace: mean arrival rate, requests per second."`
	CV             float64         `name:"cv" default:"2" help:"Generated trace, gamma arrivals: coefficient of variation of the gaps (1 is Poisson; above 1 burstier)."`
	PromptTokens   string          `name:"prompt-tokens" default:"512" placeholder:"N|LO-HI" help:"Generated trace: prompt tokens per request, fixed N or uniform LO-HI."`
	OutputTokens   string          `name:"output-tokens" default:"128" placeholder:"N|LO-HI" help:"Generated trace: output tokens per request (the first comes from prefill), fixed N or uniform LO-HI."`
	Prefill        string          `default:"1" placeholder:"COUNT[:tp=N,pp=N,ep=N]" help:"Prefill replicas: how many, and each one's tensor, pipeline and expert parallelism (ep divides tp)."`
	Decode         string          `default:"1" placeholder:"COUNT[:tp=N,pp=N,ep=N]" help:"Decode replicas, as --prefill; 0 serves colocated: each prefill replica decodes its own requests, prompts and decode tokens sharing its iterations, no KV transfer."`
	Place          string          `default:"packed" placeholder:"POLICY|GPUS" help:"Where the replicas' GPUs go: packed, spread, rail-aligned, random (--seed), or a GPU list such as 0-7,16-23; prefill replicas' ranks first, then decode's."`
	MaxBatch       int             `name:"max-batch" default:"128" help:"Requests in one prefill batch and in one decode iteration at most."`
	PrefillTokens  int64           `name:"prefill-tokens" default:"8192" help:"Prompt tokens in one prefill batch at most (a longer prompt runs alone)."`
	Chunk          int64           `default:"0" placeholder:"TOKENS" help:"Colocated serving (--decode 0): chunked prefill, at most this many tokens an iteration, the running requests' decode tokens first and queued prompts in chunks of the rest (0: whole prompts, up to --prefill-tokens)."`
	KVTokens       int64           `name:"kv-tokens" default:"0" help:"KV cache capacity of a decode replica in tokens (0: unbounded): a request joins a decode batch only when the batch's prompts and full outputs fit, first come first served, so none is preempted."`
	KVSharing      string          `name:"kv-sharing" default:"max-min" enum:"max-min,none" help:"How KV transfers share the fabric: max-min (every link shared fairly among the transfers crossing it) or none (each at its path's bottleneck whatever else is in flight, as SimAI's transfer does; for comparison)."`
	PeakTFLOPs     float64         `name:"peak-tflops" placeholder:"TFLOPS" help:"GPU dense BF16 peak in TFLOP/s (default: the topology's GPU type's datasheet figure, README)."`
	HBMBw          units.Bandwidth `name:"hbm-bw" placeholder:"BW" help:"GPU HBM bandwidth, e.g. 3350GB/s (default: the GPU type's datasheet figure)."`
	ComputeTable   string          `name:"compute-table" placeholder:"FILE.csv" help:"Per-operation times of a layer on one GPU by batch tokens (Vidur's profiling mlp.csv, or operation,num_tokens,time_ms; formats/compute-table.md), interpolated linearly, in place of the roofline for the operations it gives; the roofline prices the rest (named on stderr)."`
	ComputeEff     float64         `name:"compute-efficiency" aliases:"mfu" default:"1" placeholder:"F" help:"Share of the peak FLOP/s the roofline's kernels reach, 0 to 1 (1: the datasheet peak, a lower bound on time)."`
	HBMEff         float64         `name:"hbm-efficiency" default:"1" placeholder:"F" help:"Share of the HBM bandwidth the roofline's kernels reach, 0 to 1 (1: the datasheet figure)."`
	PPFlows        bool            `name:"pp-flows" help:"Send the activations between pipeline stages as flows on the fabric, sharing its links with the KV transfers (each stage computing an equal share of the iteration, then sending on), instead of bytes / path bottleneck + latency."`
	Seed           uint64          `default:"1" help:"Seed of the generated trace, ECMP hashing and random placement."`
	Out            string          `short:"o" placeholder:"FILE.parquet" help:"Write the per-request Parquet (fabricsim.requests/v1) to FILE instead of stdout."`
	RequestMetrics string          `name:"request-metrics" placeholder:"FILE.csv" help:"Also write Vidur/SimAI's request_metrics.csv columns (seconds) to FILE."`
	Input          string          `arg:"" optional:"" placeholder:"STREAM" help:"Stream with the topology (topogen's output; default: stdin)."`
}

const description = `Simulate LLM inference serving on a fabric and write one Parquet row per request.

Each request is prefilled on the prefill replica with the fewest prompt tokens queued (batches of
up to --max-batch requests and --prefill-tokens tokens); its KV cache, 2 x (prompt + 1) x kv_heads
x head_dim x layers x dtype bytes, then moves to the decode replica with the fewest requests as
flows from each prefill GPU to a decode GPU, sharing every link of the fabric max-min fairly with
the other transfers in flight; then it decodes under continuous batching (one token per iteration,
requests joining and leaving between iterations, --max-batch at most). An iteration takes the
roofline time of its FLOPs and HBM bytes on the replica's TP GPUs, plus two TP AllReduces per
layer (NCCL's tuning model), two EP AllToAlls per MoE layer and the pipeline stages' activation
sends (--compute-table: measured per-operation times, Vidur's profiles, in place of the roofline
for the operations they give; --compute-efficiency and --hbm-efficiency derate the roofline's
peaks; --pp-flows: the stage sends as flows sharing the fabric). With --decode 0 each replica decodes what it prefilled instead (colocated: new prompts
share iterations with the running decodes, no KV transfer). TTFT is prefill done - arrival;
TPOT is (completed - prefill done) / (output tokens - 1).

Examples:
  topogen --family fat-tree --gpus 64 --gpu-type H100 | simccl-serve --model examples/models/llama-3-8b.json --trace tests/testdata/serve/splitwise_conv_1000.csv --prefill 4:tp=8 --decode 4:tp=8 > requests.parquet
  fctstats --requests requests.parquet --plot serving.png
  topogen --gpus 64 --gpu-type H100 | simccl-serve --model examples/models/llama-2-70b.json --prefill 4:tp=8 --decode 4:tp=8 --compute-table examples/compute/vidur-h100-llama-2-70b.csv > requests.parquet
  topogen --gpus 16 | simccl-serve --model examples/models/mixtral-8x7b.json --prefill 1:tp=8,ep=8 --decode 1:tp=8,ep=8 --arrivals gamma --rate 5 --requests 200 --out run.parquet --request-metrics request_metrics.csv`

func main() {
	var c command
	cli.Main("simccl-serve", description, &c, c.run)
}

func (c *command) run() error {
	pre, err := serve.ParseReplicas(c.Prefill)
	if err == nil && pre.Count == 0 {
		err = fmt.Errorf("%q: at least one replica prefills", c.Prefill)
	}
	if err != nil {
		return cli.Usagef("--prefill %v", err)
	}
	dec, err := serve.ParseReplicas(c.Decode)
	if err != nil {
		return cli.Usagef("--decode %v", err)
	}
	place, err := collective.ParsePlacement(c.Place)
	if err != nil {
		return cli.Usagef("--place %v", err)
	}
	if c.Chunk < 0 || (c.Chunk > 0 && dec.Count > 0) {
		return cli.Usagef("--chunk %d: chunked prefill is for colocated serving: give --decode 0 (or --chunk 0)", c.Chunk)
	}
	if c.MaxBatch < 1 || c.PrefillTokens < 1 || c.KVTokens < 0 {
		return cli.Usagef("--max-batch and --prefill-tokens must be at least 1, --kv-tokens at least 0")
	}
	if !(c.ComputeEff > 0 && c.ComputeEff <= 1) || !(c.HBMEff > 0 && c.HBMEff <= 1) {
		return cli.Usagef("--compute-efficiency %g, --hbm-efficiency %g: each a share of the peak above 0, at most 1", c.ComputeEff, c.HBMEff)
	}
	if c.Out == "" {
		if err := cli.CheckBinaryStdout("Parquet request trace"); err != nil {
			return err
		}
	}
	model, err := readModel(c.Model)
	if err != nil {
		return err
	}
	reqs, err := c.requests()
	if err != nil {
		return err
	}
	t, err := readTopology(c.Input)
	if err != nil {
		return err
	}
	roof, err := roofline.For(t.GPUType)
	if c.PeakTFLOPs > 0 {
		roof.PeakFLOPs = c.PeakTFLOPs * 1e12
	}
	if c.HBMBw > 0 {
		roof.HBMBps = float64(c.HBMBw) / 8
	}
	if err != nil && (c.PeakTFLOPs <= 0 || c.HBMBw <= 0) {
		return err
	}
	// A factor of 1 leaves the peaks as they were (x * 1 is exact).
	roof.PeakFLOPs *= c.ComputeEff
	roof.HBMBps *= c.HBMEff
	table, err := c.readTable(&model, pre, dec)
	if err != nil {
		return err
	}
	world := pre.Count*pre.GPUs() + dec.Count*dec.GPUs()
	gpus, err := place.Resolve(t, world, c.Seed)
	if err != nil {
		return fmt.Errorf("--place %s: %v", c.Place, err)
	}
	if len(gpus) != world {
		return fmt.Errorf("--place %s: gives %d GPUs, the deployment (%s prefill, %s decode) needs %d", c.Place, len(gpus), pre, dec, world)
	}
	wall := time.Now()
	meter := c.Meter("simccl-serve")
	meter.Phase(fmt.Sprintf("serving %d requests", len(reqs)))
	rows, sum, err := serve.Run(t, serve.Config{Model: model, Roof: roof, Table: table, PPFlows: c.PPFlows, Prefill: pre, Decode: dec, GPUs: gpus,
		MaxBatch: c.MaxBatch, PrefillTokens: c.PrefillTokens, KVTokens: c.KVTokens, Chunk: c.Chunk, NoContention: c.KVSharing == "none", Seed: c.Seed}, reqs)
	meter.Stop()
	if err != nil {
		return err
	}
	meta := requests.Meta{Model: model.Name, Topology: trace.TopologyMeta{Family: t.Family, GPUs: t.GPUs, Hash: topo.Hash(t)},
		Params: map[string]any{"prefill": pre.String(), "decode": dec.String(), "place": c.Place, "max_batch": c.MaxBatch,
			"prefill_tokens": c.PrefillTokens, "kv_tokens": c.KVTokens, "chunk": c.Chunk, "kv_sharing": c.KVSharing, "peak_flops": roof.PeakFLOPs, "hbm_bytes_per_s": roof.HBMBps,
			"gpu_type": t.GPUType, "seed": c.Seed, "trace": c.Trace}}
	// Only when given, so that a run without them writes the same file.
	if c.ComputeTable != "" {
		meta.Params["compute_table"] = c.ComputeTable
	}
	if c.PPFlows {
		meta.Params["pp_flows"] = true
	}
	if c.ComputeEff != 1 || c.HBMEff != 1 {
		meta.Params["compute_efficiency"], meta.Params["hbm_efficiency"] = c.ComputeEff, c.HBMEff
	}
	out, done, err := cli.CreateOutput(c.Out, "Parquet request trace")
	if err != nil {
		return err
	}
	if err = done(requests.Write(out, meta, rows)); err != nil {
		return err
	}
	if c.RequestMetrics != "" {
		f, err := outfile.Create(c.RequestMetrics)
		if err != nil {
			return err
		}
		if err := f.Finish(requests.WriteMetricsCSV(f, rows)); err != nil {
			return err
		}
	}
	if dec.Count == 0 {
		fmt.Fprintf(os.Stderr, "simccl-serve: %d requests, %s on %s (%s colocated), %d iterations, makespan %s, wall %.2f s\n",
			len(rows), model.Name, units.Plural(int64(world), "GPU"), pre, sum.PrefillIterations,
			units.HumanDuration(sum.MakespanNs*1000), time.Since(wall).Seconds())
		return nil
	}
	fmt.Fprintf(os.Stderr, "simccl-serve: %d requests, %s on %s (%s prefill, %s decode), %d prefill and %d decode iterations, %d KV flows (%s), makespan %s, wall %.2f s\n",
		len(rows), model.Name, units.Plural(int64(world), "GPU"), pre, dec, sum.PrefillIterations, sum.DecodeIterations,
		sum.KVFlows, units.HumanSize(sum.KVBytes), units.HumanDuration(sum.MakespanNs*1000), time.Since(wall).Seconds())
	return nil
}

// readTable reads --compute-table and says on stderr what the roofline
// still prices.
func (c *command) readTable(m *serve.Model, specs ...serve.ReplicaSpec) (*serve.ComputeTable, error) {
	if c.ComputeTable == "" {
		return nil, nil
	}
	f, err := os.Open(c.ComputeTable)
	if err != nil {
		return nil, trace.PathError(c.ComputeTable, err)
	}
	defer f.Close()
	t, err := serve.ReadComputeTable(c.ComputeTable, f)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, spec := range specs {
		if spec.Count == 0 || seen[spec.TP] {
			continue
		}
		seen[spec.TP] = true
		rest, err := t.Roofline(m, spec.TP)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "simccl-serve: note: %s at tp=%d: the roofline prices %s\n", c.ComputeTable, spec.TP, strings.Join(rest, ", "))
	}
	return t, nil
}

func readModel(path string) (serve.Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return serve.Model{}, trace.PathError(path, err)
	}
	defer f.Close()
	return serve.ReadModel(path, f)
}

func (c *command) requests() ([]serve.Request, error) {
	if c.Trace != "" {
		f, err := os.Open(c.Trace)
		if err != nil {
			return nil, trace.PathError(c.Trace, err)
		}
		defer f.Close()
		return serve.ReadRequests(c.Trace, f)
	}
	p, err := serve.ParseLengths(c.PromptTokens)
	if err != nil {
		return nil, cli.Usagef("--prompt-tokens %v", err)
	}
	o, err := serve.ParseLengths(c.OutputTokens)
	if err != nil {
		return nil, cli.Usagef("--output-tokens %v", err)
	}
	reqs, err := serve.Synthetic{N: c.Requests, Process: c.Arrivals, Rate: c.Rate, CV: c.CV, Prefill: p, Decode: o, Seed: c.Seed}.Generate()
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return reqs, nil
}

// readTopology reads the stream to its end (so that a truncated one is
// caught) and keeps its topology record.
func readTopology(path string) (*stream.Topology, error) {
	r, rc, err := cli.OpenStream(path, "pipe a topology in, e.g. topogen --gpus 16 | simccl-serve --model examples/models/llama-3-8b.json")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return stream.ReadTopology(r)
}
