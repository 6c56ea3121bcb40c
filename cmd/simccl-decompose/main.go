// Command simccl-decompose reads a topology stream and a workload and
// writes the flow DAG: communicator groups, NCCL-style algorithm and
// protocol choices, and chunked point-to-point flows with dependencies.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakrarun"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

type command struct {
	progress.Quiet
	budget   *int64          `kong:"-"` // memory(): the budget, read once
	meter    *progress.Meter `kong:"-"`
	Input    string          `arg:"" optional:"" help:"Input stream (default: stdin)."`
	Workload string          `type:"existingfile" help:"Workload: a SimAI/AICB workload file or fabricsim's micro format (<passes> <OP> <size> <GROUP> per line)."`
	Op       string          `help:"A single collective instead of a workload: allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv."`
	Size     *units.Size     `help:"Size of --op in bytes (64MiB, 1GB ...): the full buffer for allgather/reducescatter, the per-rank send buffer for alltoall."`
	Sweep    string          `help:"nccl-tests' size sweep for --op instead of --size: MIN:MAX:FACTOR (-b -e -f), e.g. 8:16GiB:2. One collective per size, each after every rank has finished the previous one; allgather, reducescatter and alltoall sizes round down to a multiple of ranks x element size, as nccl-tests does."`
	DType    string          `name:"dtype" default:"float" help:"Element type of --op (nccl-tests' -d): sizes must be multiples of its size. One of int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2."`
	Group    string          `default:"dp" help:"Group type --op runs on: tp, dp, pp, ep, dp_ep."`
	TPFlag   *int            `name:"tp" help:"Tensor-parallel size, at least 1 (default: the workload's, else 1)."`
	DPFlag   *int            `name:"dp" help:"Data-parallel size, at least 1 (default: what the GPUs leave)."`
	PPFlag   *int            `name:"pp" help:"Pipeline-parallel size, at least 1 (default: the workload's, else 1)."`
	EPFlag   *int            `name:"ep" help:"Expert-parallel size, at least 1 (default: the workload's, else 1)."`
	GAFlag   *int            `name:"ga" help:"Microbatches per iteration (gradient accumulation steps) of a SimAI/AICB workload, at least 1 (default: the workload's ga, else 1). Each runs one of the file's microbatches (the header's ga copies of its layers, or the whole file), again from the first when there are more."`
	VPPFlag  *int            `name:"vpp" help:"Model chunks per pipeline stage, at least 1: with more than 1, Megatron-LM's interleaved 1F1B schedule (default: the workload's vpp, else 1)."`

	Selector     string         `default:"nccl" enum:"nccl,simai" help:"Algorithm selection: nccl (NCCL 2.27's tuning model) or simai (SimAI's GPU-type rules)."`
	Algo         string         `help:"Force an algorithm: ring, tree, nvls, nvls-tree (collectives), direct, pxn (alltoall). NCCL_ALGO restricts the choice NCCL's way."`
	Proto        string         `help:"Force a protocol: ll, ll128, simple. NCCL_PROTO restricts the choice NCCL's way."`
	PXN          string         `name:"pxn" default:"auto" enum:"auto,on,off" help:"Route cross-server traffic through the NIC on the receiver's rail (auto: on for NVLink servers with --selector nccl; AS_PXN_ENABLE with --selector simai)."`
	ChannelsFlag *int           `name:"channels" help:"Override the channel count of ring/tree collectives (AS_RING_CHANNELS), at least 1."`
	MaxChannels  int            `name:"max-channels" help:"Cap ring/tree channels as NCCL_MAX_NCHANNELS does (small sizes still run on fewer, as NCCL's thread thresholds give); 0: no cap."`
	MSCCL        string         `name:"msccl" type:"existingfile" help:"An MSCCL XML algorithm that replaces the built-in one for its collective and GPU count."`
	MSCCLChunk   units.Size     `name:"msccl-chunk" help:"Chunk size of --msccl (MSCCL's chunk size, the ns-3 MSCCL ThreadBlock's chunkSize): larger collectives run the algorithm in several loops of such chunks. Default: one loop of size / nchunksperloop."`
	MaxChunks    int            `name:"max-chunks" default:"16" help:"Cap pipeline chunks per channel (larger chunks for large collectives); 0 keeps NCCL's chunk sizes exactly."`
	NoLaunch     bool           `name:"no-launch-latency" help:"Do not add NCCL's base launch latency as a delay node before each collective."`
	SendLat      units.Duration `name:"send-lat" placeholder:"TIME" help:"SimAI replay: every transfer starts this long after what it waits for, in place of NCCL's base and per-step latencies, as SimAI's ns-3 SendFlow does with AS_SEND_LAT (read, in us, when this flag is absent); predicted times count it once per algorithm step."`
	Transport    []string       `name:"transport" placeholder:"KEY=VALUE" help:"The NCCL transport's slots and per-step costs (repeatable, later keys win): preset (h100-ib: the costs calibrated on 4 x 8 H100 over 400G InfiniBand; h100-efa: on 2 x 8 H100 over EFA, AWS p5, selecting as aws-ofi-nccl's p5 tuner does on AMD hosts; a100: NVLink costs calibrated on one 8 x A100 server, h100-ib's network step costs with InfiniBand's adaptive routing, an AMD host and tree steps calibrated on 2 x 8 A100 over RoCE (OCI BM.GPU4.8); a100-roce: a100 without adaptive routing, as NCCL runs RoCE; h100-roce: h100-ib without it (reasoned, not fitted: no H100 RoCE sweep); a100-efa: a100's NVLink costs with h100-efa's EFA costs, NCCL 2.8-2.19's tree Simple chunk and NCCL's 2-server tree graph, calibrated on 2 x p4de (A100, 4 x 100G EFA; run with NCCL_PROTO=simple as aws-ofi-nccl sets it there); auto, the default: the preset of the topology's GPU generation and NICs' network (topogen --nic-network ib, roce or efa; InfiniBand when it does not say), a100, a100-roce or a100-efa for A100 and A800, h100-ib, h100-roce or h100-efa for H100, H800, H20 and B200 (uncalibrated: no B200 sweep), so that times match measured clusters; none: NCCL's tuning-model latencies alone, no per-step cost, as before the transport was modelled); slots (NCCL_STEPS, 8), buffsize (4194304), ll-buffsize (524288), ll128-buffsize (4915200), nvls-chunk (NVLS-Tree's chunk per head before NCCL shrinks it; NCCL's 128 KiB, 64 KiB from 4 servers, unless set) in bytes; gpu-step, send-proxy, recv-proxy in us per step, credit-rtt in us; slice-ll, slice-ll128, slice-simple: a ring slice's fixed work in us, in series with its bytes; proxy-op: the proxy thread's us per send or receive step, in series over a GPU's NVLS-Tree channels (0.3 under the h100 presets); p2p-op: the same for an AllToAll's network connections (1.6 IB, 2.4 EFA); ring-op: the proxy's us per network step of a multi-server LL/LL128 ring, ar-op: us more per step above ar-threshold (bytes, InfiniBand adaptive routing's 8192; 0: none); nvls-op: a single-server NVLS channel's fixed GPU work per chunk below 128 KiB in us, nvls-bw: its rate in GB/s on the chunk's bytes (0: none), together pacing the channel's chunks; nvls-tree-op, nvls-tree-bw: an NVLS-Tree AllReduce's GPU work per loop and channel, fixed us plus the loop's shard (the chunk a GPU heads) at that rate in GB/s (0: none; h100-ib 0 and 1.3, h100-efa 15 and 2), pacing a GPU's reduced shards, the first loop's before its bytes; ll-bw: LL's bus bandwidth in GB/s, in series with an LL ring's slices (0: none); launch: the host's us to launch one GPU's part of a collective, gpus-per-process: how many GPUs one process drives (nccl-tests' -g, 1 by default): a collective takes at least their product when above 1; ll128-tail: the bytes of a multi-server LL128 ring step whose copy is in series with its wire bytes (131072, h100-efa and a100 0; beyond them the copy overlaps the wire); tuner: nccl (NCCL's model chooses) or aws-p5 (aws-ofi-nccl's p5 regions choose an AllReduce on 3+ servers at 8 ranks a server); host-cpu: intel or amd (NCCL's network overhead doubles on AMD); net-latency: the network plugin's reported latency in us, added to every step across servers in NCCL's choice (aws-ofi-nccl: 75, h100-efa sets it); tree-op, tree-bw: a tree LL128 AllReduce's step on each GPU, its fixed work in us plus its inputs' wire bytes at its share (70% reducing up, 30% broadcasting down, the root all) of a thread block's LL128 rate in GB/s (0: off; h100-efa 4 and 30, a100 2 and 10); tree-ll128-send: lines (a tree LL128 network step's first piece across servers pays the hop's latency and step cost only; a100) or whole (it also waits its sender's work on the whole step, tree-op plus its inputs at tree-bw, as NCCL's send proxy posts an LL128 step once the GPU has written all of it; h100-efa); tree-ll-bw: the same for a tree LL AllReduce, no fixed work, under which its network step leaves whole (0: off; a100 4, h100-ib and h100-efa 3); tree-ll-first: whole (under tree-ll-bw a connection's first piece pays the whole step cost, a100) or share (its share of it, h100-ib); p2p-chunk: an AllToAll's network step in bytes (NCCL_P2P_NET_CHUNKSIZE, 131072; AWS sets 524288); max-recvs: receives the network plugin takes in one irecv, which an AllToAll's proxy posts once for each remote server's ranks under PXN (1 in every preset; NCCL's InfiniBand plugin takes 8, aws-ofi-nccl 1 before v1.20 and 8 from it); tree-chunk: step (a tree Simple AllReduce's chunk is one Simple step, NCCL 2.20 and later) or depth (NCCL 2.8-2.19: halved to 32 KiB by the tree's depth; a100-efa); tree-graph: ring (a tree uses the ring's graph) or nccl (NCCL's search raises a 2-server tree's intra-server bandwidth up to twice the inter-server one, which its model then weighs; a100-efa); tree-lat: current (NCCL 2.23 and later's tree Simple latency, the tuner's) or legacy (NCCL 2.22 and earlier's, 28 us a hop, which NCCL's choice weighs: a 2-server Tree LL128 keeps 512 MiB as NCCL 2.19 did on OCI); channel-split: even (NCCL 2.22 and earlier: a collective's bytes split evenly over the thread threshold's channels; the default, a100) or cells (NCCL 2.23-2.25: 16 KiB of traffic a channel at least; h100-ib, h100-efa); net-shared-buffers: 1 (NCCL_NET_SHARED_BUFFERS' default, every preset: an AllToAll's network connections on one channel share its 16 buffer slots, 16/n steps each in flight, 2 on 2 x 8) or 0 (each connection its own 8) (pkg/collective/transport.go)."`
	Place        string         `placeholder:"POLICY|GPUS" help:"The fabric's GPUs the job runs on: a policy, packed (the default: ranks on GPUs 0, 1, ...), spread (consecutive servers of the job under different leaf switches, and pods where the fabric has several), rail-aligned (the fewest leaf groups, each rank on the GPU of its rail), random (servers drawn with --seed); or a Slurm-style GPU list in rank order, e.g. 0-127,256-383. With --place the job may be smaller than the fabric: its size is the list's length, else tp x dp x pp when --dp is given, else the workload's all_gpus, else the topology's GPUs. Policies place whole servers, in local GPU order."`
	PlaceKeepTP  bool           `name:"place-keep-tp" help:"Refuse a placement that puts a tensor-parallel group on more than one server."`
	Job          string         `placeholder:"NAME" help:"Tag the stream as job NAME (a job record, formats/stream.md): every trace row of its flows carries it (the trace's job column), and --merge keeps the jobs apart by it."`
	JobStart     units.Duration `name:"job-start" placeholder:"TIME" help:"With --job: when the job starts in a --merge (e.g. 2ms; default 0): its first operations wait for it."`
	Straggler    []string       `placeholder:"SPEC" help:"A straggler (repeatable; a later spec for the same rank wins): rank=R:1.5 slows job rank R's compute phases by the factor (> 0), server=S:1.5 every rank of the job on the fabric's server S; rank=R:+2ms or server=S:+2ms delays the rank's first operation. At --granularity collective a stage's representative takes its stage's slowest factor and latest start."`
	Merge        []string       `placeholder:"A.stream,B.stream" help:"Merge jobs' streams (simccl-decompose's outputs, each decomposed with --job and --place on disjoint GPUs of the same topology) into one stream with disjoint group, collective and flow ids, each job starting at its --job-start; instead of decomposing. Comma-separated or repeated."`
	Granularity  string         `default:"flow" enum:"flow,collective" help:"flow: every collective as its flows (every backend runs it). collective: one rank per pipeline stage stands for the stage, each collective other than a pipeline transfer one COLL node with NCCL's model time; for SimAI-scale workloads through flowsim-analytical, busbw or fluid (formats/stream.md)."`
	CollTime     string         `name:"coll-time" default:"nccl" enum:"nccl,links" help:"How a COLL node is timed at collective granularity: nccl, NCCL's tuning-model time (with --transport, the transport's mechanism in closed form for rings, trees and NVLS-Tree); links, the flows' mechanism in closed form: the same latencies and step costs, the bytes the flows put on each GPU's NVLink and NIC over the links' rates, so that it agrees with flow granularity."`

	Pattern   string         `help:"Synthetic traffic instead of a workload: uniform, permutation, incast, shift-alltoall, stencil, nearest-neighbour. Every sending GPU injects --msg-size messages as a Poisson process at --rate of its NIC bandwidth for --duration (incast: --fan-in random GPUs into GPU 0, together at --rate of its bandwidth)." group:"traffic"`
	MsgSize   units.Size     `name:"msg-size" help:"Message size of --pattern (e.g. 1KiB)." group:"traffic"`
	Rate      string         `default:"100%" help:"Offered load of --pattern: a share of the injection bandwidth, 1% to 100% (or 0.01 to 1)." group:"traffic"`
	Duration  units.Duration `help:"How long --pattern injects (e.g. 10ms)." group:"traffic"`
	FanIn     int            `name:"fan-in" help:"Senders of --pattern incast." group:"traffic"`
	Seed      uint64         `default:"1" help:"Random seed of --pattern and of --place random." group:"traffic"`
	FromHtsim string         `name:"from-htsim" type:"existingfile" help:"An htsim connection matrix (.cm): host i is GPU i, start times in ps, triggers become dependencies." group:"traffic"`

	Chakra     string          `placeholder:"PREFIX" help:"Chakra execution traces instead of a workload: PREFIX.0.et, PREFIX.1.et, ... one per rank (ASTRA-sim's --workload-configuration; gzipped or not). COMP nodes are delays of duration_micros, COMM_COLL nodes collectives over their pg_name's group (matched across ranks by their order in the group), COMM_SEND/COMM_RECV pairs (src, dst, tag) transfers; each node waits for its ctrl_deps and data_deps. Flow granularity only."`
	CommGroups string          `name:"comm-groups" type:"existingfile" placeholder:"FILE" help:"ASTRA-sim's --comm-group-configuration JSON for --chakra: {\"1\":[0,1,2,3],...}; a node's pg_name is the key, an empty pg_name or \"0\" means every rank with a trace."`
	RoofTFlops *float64        `name:"peak-tflops" placeholder:"TFLOPS" help:"--chakra: the GPU's peak in TFLOP/s for COMP nodes without a duration (time max(num_ops / peak, tensor_size / bandwidth), ASTRA-sim's roofline); default: the topology's gpu_type's dense BF16 peak (H100 989; pkg/roofline)."`
	RoofMemBW  units.Bandwidth `name:"hbm-bw" placeholder:"BW" help:"--chakra: the GPU's memory bandwidth for the roofline, e.g. 3350GB/s; default: the topology's gpu_type's HBM bandwidth (H100 3350GB/s)."`
	Format     string          `default:"stream" enum:"stream,chakra" help:"Output: stream (the flow DAG) or chakra: the workload (without --workload or --op: the collective-granularity stream on stdin) as Chakra execution traces, one per rank, --out PREFIX writing PREFIX.<rank>.et and PREFIX.comm_groups.json (for ASTRA-sim, or --chakra)."`

	Summary bool   `help:"Print per collective: algorithm, protocol, channels, flows, bytes on the wire, predicted time (instead of the stream)."`
	Out     string `short:"o" help:"Write the stream (or --summary) to FILE instead of stdout."`

	traces []*chakra.Trace `kong:"-"`

	// The flags above as numbers, 0 where a flag was left out.
	TP, DP, PP, EP, GA, VPP, Channels int `kong:"-"`
}

// counts checks the size flags: one left out takes its default (0 here);
// one given must be positive, so that 0 never silently means "default".
func (c *command) counts() error {
	for _, f := range []struct {
		name string
		v    *int
		to   *int
	}{{"tp", c.TPFlag, &c.TP}, {"dp", c.DPFlag, &c.DP}, {"pp", c.PPFlag, &c.PP}, {"ep", c.EPFlag, &c.EP},
		{"ga", c.GAFlag, &c.GA}, {"vpp", c.VPPFlag, &c.VPP}, {"channels", c.ChannelsFlag, &c.Channels}} {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 {
			return fmt.Errorf("--%s %d must be at least 1 (leave it out for the default)", f.name, *f.v)
		}
		*f.to = *f.v
	}
	return nil
}

const description = `Decompose a workload, synthetic traffic or an htsim connection matrix into the flow DAG
every fabricsim backend simulates.

Reads the stream from topogen (and ncclpath) on stdin and adds groups, collectives and flows.

Examples:
  topogen --family spectrum-x --gpus 16 | simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 | flowsim-analytical
  topogen --gpus 128 | simccl-decompose --op allreduce --size 64MiB --group dp --tp 8 --summary
  topogen --gpus 9216 | simccl-decompose --workload examples/workloads/simai_workload_analytical.txt --granularity collective | flowsim-analytical --model busbw | fctstats --iteration
  topogen --family spectrum-x --gpus 16 --gpu-type A100 | simccl-decompose --op allreduce --size 8MiB --group tp --tp 8 --msccl examples/msccl/ring_allreduce_8.xml
  topogen --gpus 32 | simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --place 16-31 | flowsim-analytical
  topogen --family fat-tree --fat-tree-k 8 --gpus 128 --oversubscription 4 | simccl-decompose --op allreduce --size 64MiB --group dp --tp 8 --dp 2 --place spread | flowsim-analytical
  simccl-decompose --merge a.stream,b.stream | flowsim-analytical | fctstats --iteration   (a.stream, b.stream: decomposed with --job a / --job b on disjoint --place)
  topogen --gpus 128 | simccl-decompose --pattern uniform --msg-size 4KiB --rate 50% --duration 100us | flowsim-packet | fctstats
  topogen --family fat-tree --gpus 16 --gpus-per-server 1 | simccl-decompose --from-htsim examples/htsim/incast16.cm | flowsim-analytical
  topogen --gpus 16 | simccl-decompose --workload examples/workloads/pipeline_pp4_ga8.txt --granularity collective | simccl-decompose --format chakra --out pp

Environment (flags win): NCCL_ALGO, NCCL_PROTO (enable lists), NCCL_MAX_NCHANNELS, AS_NVLS_ENABLE, AS_PXN_ENABLE,
AS_RING_CHANNELS, AS_NV_CHANNELS, AS_GPU_TYPE, AS_SEND_LAT (as SimAI reads them: a channel count
of 0 means the model's own, as in SimAI; --channels 0 is refused; AS_SEND_LAT is SimAI replay,
see --send-lat).`

func main() {
	var c command
	cli.Main("simccl-decompose", description, &c, c.run)
}

func envInt(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("environment %s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

func (c *command) options() (collective.Options, error) {
	opt := collective.Options{Selector: c.Selector, Algo: c.Algo, Proto: c.Proto,
		AlgoList: os.Getenv("NCCL_ALGO"), ProtoList: os.Getenv("NCCL_PROTO"), LaunchLatency: !c.NoLaunch, MaxChunks: c.MaxChunks, CollTime: c.CollTime}
	var err error
	if opt.SendLatPs, err = cli.SendLatency(int64(c.SendLat)); err != nil {
		return opt, err
	}
	// The keys are checked here; run applies them over the preset of the
	// topology's GPU generation once it has read the topology.
	if _, err := collective.NewTransport("", "", c.Transport); err != nil {
		return opt, err
	}
	nvls, err := envInt("AS_NVLS_ENABLE")
	if err != nil {
		return opt, err
	}
	opt.SimAINVLS = nvls > 0
	if opt.RingChannels, err = envInt("AS_RING_CHANNELS"); err != nil {
		return opt, err
	}
	if opt.NVLSChannels, err = envInt("AS_NV_CHANNELS"); err != nil {
		return opt, err
	}
	if c.Channels > 0 {
		opt.RingChannels = c.Channels
	}
	if opt.MaxChannels, err = envInt("NCCL_MAX_NCHANNELS"); err != nil {
		return opt, err
	}
	if c.MaxChannels < 0 {
		return opt, fmt.Errorf("--max-channels=%d: want 0 (no cap) or more", c.MaxChannels)
	}
	if c.MaxChannels > 0 {
		opt.MaxChannels = c.MaxChannels
	}
	switch c.PXN {
	case "on", "off":
		opt.PXN = c.PXN
	default:
		if c.Selector == "simai" {
			px, err := envInt("AS_PXN_ENABLE")
			if err != nil {
				return opt, err
			}
			opt.PXN = map[bool]string{true: "on", false: "off"}[px > 0]
		}
	}
	return opt, nil
}

// simAIEnvRead is SimAI's variables this run reads: those no flag
// overrides, the selection's only under --selector simai (README's table).
func (c *command) simAIEnvRead() []string {
	unread := map[string]bool{
		"AS_NET_BW":        true, // the topology's NIC rate instead
		"AS_SEND_LAT":      c.SendLat != 0,
		"AS_RING_CHANNELS": c.Channels != 0,
		"AS_NVLS_ENABLE":   c.Selector != "simai",
		"AS_PXN_ENABLE":    c.Selector != "simai" || c.PXN == "on" || c.PXN == "off",
	}
	return slices.DeleteFunc(slices.Clone(cli.SimAIEnvNames), func(n string) bool { return unread[n] })
}

func (c *command) workload() (*workload.Workload, error) {
	switch {
	case c.Workload != "" && c.Op != "":
		return nil, cli.Usagef("give either --workload or --op, not both")
	case c.Workload != "":
		f, err := os.Open(c.Workload)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		mem, err := c.memory()
		if err != nil {
			return nil, err
		}
		return workload.ReadLimit(f, c.Workload, mem)
	case c.Op != "":
		op, err := nccl.ParseOp(c.Op)
		if err != nil {
			return nil, err
		}
		elem, ok := units.DTypes[c.DType]
		if !ok {
			return nil, cli.Usagef("--dtype %q: one of %s", c.DType, strings.Join(units.DTypeNames(), ", "))
		}
		g := strings.ToUpper(c.Group)
		switch {
		case c.Sweep != "" && c.Size != nil:
			return nil, cli.Usagef("give either --size or --sweep, not both")
		case c.Sweep != "":
			// Sizes depend on the group's size: sweepSizes fills them in
			// once the layout is known.
			if _, err := workload.ParseSweep(c.Sweep); err != nil {
				return nil, fmt.Errorf("--sweep %v", err)
			}
			return &workload.Workload{}, nil
		case c.Size == nil:
			return nil, cli.Usagef("--op needs --size (or --sweep)")
		case *c.Size <= 0:
			// A bad value, not a usage error: exit 1 as for --size -5 (DESIGN.md).
			return nil, fmt.Errorf("--size 0: a collective moves at least one element")
		case int64(*c.Size)%elem != 0:
			return nil, fmt.Errorf("--size %d is not a multiple of the %d-byte %s element (--dtype)", int64(*c.Size), elem, c.DType)
		}
		return &workload.Workload{Steps: []workload.Step{{Op: op, Size: int64(*c.Size), Group: g, Label: string(op)}}}, nil
	}
	return nil, cli.Usagef("nothing to decompose: give --workload FILE or --op OP --size SIZE")
}

// sweepSizes builds the --sweep workload for the layout's group size.
func (c *command) sweepSizes(l workload.Layout) (*workload.Workload, error) {
	op, _ := nccl.ParseOp(c.Op)
	sw, _ := workload.ParseSweep(c.Sweep)
	g := strings.ToUpper(c.Group)
	groups, err := l.Groups(g)
	if err != nil {
		return nil, err
	}
	sizes, err := sw.Sizes(op, units.DTypes[c.DType], len(groups[0]))
	if err != nil {
		return nil, fmt.Errorf("--sweep %s: %v (--dtype %s)", c.Sweep, err, c.DType)
	}
	return workload.FromSweep(op, g, sizes), nil
}

func (c *command) run() (err error) {
	if err := c.counts(); err != nil {
		return err
	}
	if len(c.Merge) > 0 {
		if c.Workload != "" || c.Op != "" || c.Pattern != "" || c.FromHtsim != "" || c.Chakra != "" || c.Input != "" || c.Place != "" || c.Job != "" || len(c.Straggler) > 0 || c.Summary || c.Format != "stream" {
			return cli.Usagef("--merge reads the jobs' streams it names and writes one stream: give no other input, --place, --job, --straggler, --summary or --format")
		}
		return c.merge()
	}
	switch {
	case c.Job == "" && c.JobStart != 0:
		return cli.Usagef("--job-start goes with --job")
	case c.JobStart < 0 || c.JobStart > 1e15:
		return fmt.Errorf("--job-start %v: a job starts between 0 and 1000s", c.JobStart)
	case c.Job != "" && (len(c.Job) > 256 || strings.ContainsFunc(c.Job, func(r rune) bool { return r < ' ' || r == 0x7f })):
		return fmt.Errorf("--job: a job's name has 1 to 256 printable bytes")
	case c.Job != "" && (c.Pattern != "" || c.FromHtsim != "" || c.Chakra != "" || c.Format == "chakra"):
		return cli.Usagef("--job tags a workload's stream (--workload or --op)")
	}
	traffic := c.Pattern != "" || c.FromHtsim != ""
	var w *workload.Workload
	switch {
	case c.Pattern != "" && c.FromHtsim != "":
		return cli.Usagef("give either --pattern or --from-htsim, not both")
	case traffic && (c.Workload != "" || c.Op != ""):
		return cli.Usagef("--pattern and --from-htsim replace --workload and --op: give one input")
	case traffic && c.Granularity == "collective":
		return cli.Usagef("--granularity collective is for workloads: traffic inputs are flows")
	case c.Place != "" && (traffic || c.Chakra != "" || c.Format == "chakra"):
		return cli.Usagef("--place places a workload (--workload or --op) in the stream; --pattern, --from-htsim and --chakra name GPUs themselves, and --format chakra writes one trace per rank")
	case len(c.Straggler) > 0 && (traffic || c.Chakra != "" || c.Format == "chakra"):
		return cli.Usagef("--straggler slows a workload's ranks (--workload or --op); --pattern, --from-htsim and --chakra bring their own timing, and --format chakra writes the workload as it is")
	case c.CollTime != "nccl" && c.Granularity != "collective":
		return cli.Usagef("--coll-time times COLL nodes: it needs --granularity collective")
	case c.PlaceKeepTP && c.Place == "":
		return cli.Usagef("--place-keep-tp checks a --place")
	case c.Format == "chakra" && (traffic || c.Chakra != ""):
		return cli.Usagef("--format chakra writes a workload (--workload or --op) or a collective-granularity stream on stdin as Chakra traces")
	case c.Format == "chakra" && (c.Out == "" || c.Summary):
		return cli.Usagef("--format chakra needs --out PREFIX (the traces are PREFIX.<rank>.et), and no --summary")
	case c.Format == "chakra" && c.Workload == "" && c.Op == "":
		if c.GA != 0 || c.VPP != 0 || c.TP != 0 || c.DP != 0 || c.PP != 0 || c.EP != 0 || c.Sweep != "" || c.CommGroups != "" || c.RoofTFlops != nil || c.RoofMemBW != 0 {
			return cli.Usagef("--format chakra without --workload or --op writes the collective-granularity stream on stdin as it is: its groups give the layout (no --tp, --dp, --pp, --ep, --ga, --vpp, --sweep, --comm-groups or --roofline-*)")
		}
		return c.chakraFromStream()
	case c.Chakra != "":
		if traffic || c.Workload != "" || c.Op != "" {
			return cli.Usagef("--chakra replaces --workload, --op, --pattern and --from-htsim: give one input")
		}
		if c.Granularity == "collective" {
			return cli.Usagef("--chakra runs at --granularity flow only: a Chakra trace is a DAG per rank, with no pipeline stage for one rank to stand for")
		}
		if c.GA != 0 || c.VPP != 0 || c.TP != 0 || c.DP != 0 || c.PP != 0 || c.EP != 0 {
			return cli.Usagef("--tp, --dp, --pp, --ep, --ga and --vpp shape a workload; Chakra traces bring their own groups (--comm-groups)")
		}
		if c.traces, err = chakra.ReadPrefix(c.Chakra); err != nil {
			return err
		}
	case c.CommGroups != "" || c.RoofTFlops != nil || c.RoofMemBW != 0:
		return cli.Usagef("--comm-groups, --peak-tflops and --hbm-bw go with --chakra")
	case !traffic:
		if w, err = c.workload(); err != nil {
			return err
		}
	}
	opt, err := c.options()
	if err != nil {
		return err
	}
	r, in, err := cli.OpenStream(c.Input, "pipe a topology in, e.g. topogen --gpus 16 | simccl-decompose --op allreduce --size 64MiB")
	if err != nil {
		return err
	}
	defer in.Close()
	c.meter = c.Meter("simccl-decompose")
	defer c.meter.Stop()
	c.meter.Phase("reading " + r.Name())
	// Read everything before the flows we add; keep it to forward.
	var top *stream.Topology
	var fwd []rec
	var paths []*stream.Paths
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch kind {
		case stream.KindTopology:
			if top, err = r.Topology(); err != nil {
				return err
			}
			if err := topo.Validate(top); err != nil {
				return r.Errorf("", "%v", err)
			}
			fwd = append(fwd, rec{kind: kind})
		case stream.KindGroup, stream.KindCollective, stream.KindFlow, stream.KindJob:
			return r.Errorf("", "the input already holds %s records: it was decomposed before", kind)
		default:
			raw, err := r.Raw()
			if err != nil {
				return err
			}
			if kind == stream.KindPaths { // ncclpath's view of the servers: used and forwarded
				p, err := stream.DecodeRaw(kind, raw, r.Name(), r.Index(), (*stream.Reader).Paths)
				if err != nil {
					return err
				}
				paths = append(paths, p)
			}
			fwd = append(fwd, rec{kind, raw})
		}
	}
	if top == nil {
		return fmt.Errorf("%s: no topology record (pipe topogen's output in)", r.Name())
	}
	if traffic {
		msgs, err := c.messages(top)
		if err != nil {
			return err
		}
		return c.writeTraffic(top, fwd, msgs)
	}
	for _, kv := range cli.SimAIEnvMissed(top.Params[topo.ParamSimAIEnv], c.simAIEnvRead()...) {
		fmt.Fprintf(os.Stderr, "simccl-decompose: warning: %s reached topogen (the topology's params say so) but not simccl-decompose, which reads it: export it, or set it before simccl-decompose too\n", kv)
	}
	modelTopo := *top
	if gt := os.Getenv("AS_GPU_TYPE"); gt != "" {
		if _, ok := topo.GPUSpecs[gt]; !ok {
			return fmt.Errorf("environment AS_GPU_TYPE=%q is not a GPU type (one of %s)", gt, strings.Join(topo.GPUTypeNames(), ", "))
		}
		modelTopo.GPUType = gt // selection only; the topology passes on unchanged
	}
	tr, err := collective.NewTransport(modelTopo.GPUType, modelTopo.Params[topo.ParamNICNetwork], c.Transport)
	if err != nil {
		return err
	}
	opt.Transport = &tr
	// Prefer NCCL's own path computation (ncclpath) over the topology's
	// fixed assumptions; the model treats all servers like server 0.
	var model nccl.ServerModel
	if p := nccl.PathsOf(paths, 0); p != nil {
		model, err = nccl.ModelFromPaths(p, &modelTopo)
	} else {
		model, err = nccl.ModelFromTopology(&modelTopo)
	}
	if err != nil {
		return err
	}
	fab := collective.FabricOf(top)
	if c.traces != nil {
		return c.runChakra(top, fwd, model, fab, opt)
	}
	tp, dp, pp, ep := c.TP, c.DP, c.PP, c.EP
	if tp == 0 {
		tp = w.TP
	}
	if pp == 0 {
		pp = w.PP
	}
	if ep == 0 {
		ep = w.EP
	}
	place, world, err := c.jobSize(w, top, tp, pp)
	if err != nil {
		return err
	}
	layout, err := workload.NewLayout(world, tp, dp, pp, ep)
	if err != nil {
		if herr := c.headerLayoutError(w.AICB, world, tp, pp, ep); herr != nil {
			return herr
		}
		if c.Place != "" {
			return fmt.Errorf("--place %s: %v", c.Place, err)
		}
		return err
	}
	if c.Place != "" {
		gpus, err := place.Resolve(top, world, c.Seed)
		if err == nil {
			layout, err = layout.Placed(gpus, top.GPUs)
		}
		if err == nil && c.PlaceKeepTP {
			err = collective.KeepTP(layout, fab)
		}
		if err != nil {
			return fmt.Errorf("--place %s: %v", c.Place, err)
		}
	}
	if err := c.schedule(w, layout); err != nil {
		return err
	}
	if c.Sweep != "" {
		if w, err = c.sweepSizes(layout); err != nil {
			return err
		}
	}
	if c.Format == "chakra" {
		files, err := chakrarun.WriteWorkload(w, layout, c.Out)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "simccl-decompose: wrote %d Chakra traces %s and the group file %s (run them with --chakra %s --comm-groups %s)\n",
			len(files)-1, chakra.RankFile(c.Out, 0)+"...", files[len(files)-1], c.Out, files[len(files)-1])
		return nil
	}
	d, err := newDecomposer(model, fab, layout, opt)
	if err != nil {
		return err
	}
	d.Collectives = c.Granularity == "collective"
	if d.Stragglers, err = collective.ParseStragglers(c.Straggler, layout, fab); err != nil {
		return fmt.Errorf("--straggler %v", err)
	}
	if d.MemoryLimit, err = c.memory(); err != nil {
		return err
	}
	if c.MSCCL != "" {
		f, err := os.Open(c.MSCCL)
		if err != nil {
			return err
		}
		d.Planner.MSCCL, err = collective.ParseMSCCL(f, c.MSCCL)
		f.Close()
		if err != nil {
			return err
		}
		d.Planner.MSCCL.ChunkBytes = int64(c.MSCCLChunk)
	} else if c.MSCCLChunk != 0 {
		return cli.Usagef("--msccl-chunk sets the chunk size of --msccl")
	}
	c.meter.Phase(fmt.Sprintf("scheduling %d steps", len(w.Steps)))
	colls, err := d.Prepare(w)
	c.meter.Hide() // for the note below
	if err != nil {
		return err
	}
	if n, all := collective.NoOps(colls); n > 0 {
		fmt.Fprintf(os.Stderr, "simccl-decompose: note: %d of %d collectives move nothing (a 1-rank group or 0 bytes): zero time, one join per rank and no transfer\n", n, all)
	}
	var notes []string
	if n, all := d.ModelOnly(colls); n > 0 {
		// In the stream too, so that every report of the run says it.
		notes = append(notes, fmt.Sprintf("%d of %d collectives cross servers without NVLink (one GPU a server): collective granularity prices them from NCCL's model time, without the closed forms of the flows' mechanism under the transport's step costs, and can be several times off the flows (--granularity flow runs the mechanism)", n, all))
		fmt.Fprintln(os.Stderr, "simccl-decompose: warning:", notes[0])
	}
	if c.Summary {
		err := d.Emit(w, colls, collective.NewEmitter(meteredSink(discard{}, c.meter, colls)))
		c.meter.Stop() // before the table, which may go to the same terminal
		if err != nil {
			return err
		}
		out, done, err := cli.CreateOutput(c.Out, "")
		if err != nil {
			return err
		}
		transport := collective.TransportLabel(modelTopo.GPUType, modelTopo.Params[topo.ParamNICNetwork], c.Transport)
		if opt.SendLatPs > 0 {
			transport = "none (SimAI replay: a send latency in place of NCCL's and the transport's)"
		}
		err = collective.WriteSummary(out, colls)
		if err == nil {
			_, err = fmt.Fprintf(out, "transport: %s\n", transport)
		}
		return done(err)
	}
	return c.write(top, fwd, func(sw *stream.Writer) error {
		if c.Job != "" {
			if err := sw.Job(&stream.Job{Name: c.Job, StartPs: int64(c.JobStart)}); err != nil {
				return err
			}
		}
		for _, n := range notes {
			if err := sw.Note(&stream.Note{Producer: "simccl-decompose", Text: n}); err != nil {
				return err
			}
		}
		for i := range d.Groups() {
			if err := sw.Group(&d.Groups()[i]); err != nil {
				return err
			}
		}
		for i := range colls {
			if err := sw.Collective(&colls[i].Rec); err != nil {
				return err
			}
		}
		return d.Emit(w, colls, collective.NewEmitter(meteredSink(sw, c.meter, colls)))
	})
}

// memory is the machine's memory budget, which bounds a workload's
// schedule as it bounds the backends' flows. The runtime is given it as
// its soft limit too: the collector then works harder near the budget
// instead of letting garbage from the flows written take the process
// past it (20,000 lines of two AllReduces: 517 MB of RSS for 130 MB live).
// It is read once: under an address-space limit the budget is what is
// left above the process's size, which the schedule itself then grows.
func (c *command) memory() (int64, error) {
	if c.budget == nil {
		limit, err := cli.MemoryBudget()
		if err != nil {
			return 0, err
		}
		if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(limit)
		}
		c.budget = &limit
	}
	return *c.budget, nil
}

// schedule rebuilds a SimAI/AICB workload's pipeline schedule for the
// layout's stages and the --ga and --vpp flags, and passes its warnings on.
func (c *command) schedule(w *workload.Workload, l workload.Layout) error {
	m := w.AICB
	if m == nil {
		if c.GA != 0 || c.VPP != 0 {
			return cli.Usagef("--ga and --vpp schedule a SimAI/AICB workload's pipeline; give --workload with such a file")
		}
		return nil
	}
	for _, msg := range w.Warnings {
		fmt.Fprintln(os.Stderr, "simccl-decompose: warning:", msg)
	}
	if m.AllGPUs > 0 && m.AllGPUs != l.World() && c.Place == "" {
		fmt.Fprintf(os.Stderr, "simccl-decompose: warning: %s: line %d: all_gpus is %d, the topology has %d GPUs: using the topology's, as SimAI uses its command line's\n", m.File, m.HeaderLine, m.AllGPUs, l.World())
	}
	if l.PP > 1 && m.PPComm == 0 {
		fmt.Fprintf(os.Stderr, "simccl-decompose: warning: %s: line %d: no pp_comm: stages hand activations over in zero time\n", m.File, m.HeaderLine)
	}
	ga, vpp := m.GA, m.VPP
	if c.GA != 0 {
		ga = c.GA
	}
	if c.VPP != 0 {
		vpp = c.VPP
	}
	if c.GA == 0 && c.VPP == 0 && l.PP == m.PP {
		return nil // ReadWorkload scheduled it from the header
	}
	mem, err := c.memory()
	if err != nil {
		return err
	}
	steps, err := m.ScheduleLimit(l.PP, ga, vpp, mem)
	var fe *workload.FieldError
	if errors.As(err, &fe) {
		return cli.Usagef("--%s: %v (workload %s)", fe.Field, fe.Err, m.File)
	}
	if err != nil {
		return err
	}
	w.Steps = steps
	return nil
}

// headerLayoutError names the workload header's field whose parallel
// size does not fit the GPUs (nil when a flag set it, or it fits): the
// layout's own message names no file, line or field.
func (c *command) headerLayoutError(m *workload.AICB, world, tp, pp, ep int) error {
	if m == nil {
		return nil
	}
	whose := "topology's"
	if c.Place != "" {
		whose = "job's"
	}
	field, err := "", error(nil)
	switch {
	case c.PP == 0 && pp > 1 && world%pp != 0:
		field, err = "pp", fmt.Errorf("%d pipeline stages do not divide the %s %d GPUs", pp, whose, world)
	case c.TP == 0 && tp > 1 && world%(tp*pp) != 0 && (c.PP == 0 || world%tp != 0):
		// With --pp given, the header's tp is to blame only if it does
		// not divide the GPUs alone (else the layout's own message, tp x
		// pp, stands).
		field, err = "model_parallel_NPU_group", fmt.Errorf("tp %d x pp %d does not divide the %s %d GPUs", tp, pp, whose, world)
	case c.EP == 0 && c.DP == 0 && ep > 1 && world%(tp*pp) == 0 && world/(tp*pp)%ep != 0:
		field, err = "ep", fmt.Errorf("ep %d does not divide dp %d (the %s %d GPUs over tp %d x pp %d)", ep, world/(tp*pp), whose, world, tp, pp)
	default:
		return nil
	}
	return &topo.LineError{File: m.File, Line: m.HeaderLine, Field: field, Err: err}
}

// jobSize parses --place and gives the job's size: the topology's GPUs
// without --place; with it, the GPU list's length, else tp x dp x pp when
// --dp is given, else the workload's all_gpus, else the topology's GPUs.
func (c *command) jobSize(w *workload.Workload, top *stream.Topology, tp, pp int) (collective.Placement, int, error) {
	if c.Place == "" {
		return collective.Placement{}, top.GPUs, nil
	}
	p, err := collective.ParsePlacement(c.Place)
	if err != nil {
		return p, 0, fmt.Errorf("--place: %v", err)
	}
	world := top.GPUs
	switch m := w.AICB; {
	case p.Policy == "":
		if err := workload.CheckPlacement(p.GPUs, top.GPUs); err != nil {
			return p, 0, fmt.Errorf("--place %s: %v", c.Place, err)
		}
		world = len(p.GPUs)
	case c.DP != 0:
		world = max(tp, 1) * c.DP * max(pp, 1)
	case m != nil && m.AllGPUs > 0:
		if m.AllGPUs > top.GPUs {
			return p, 0, &topo.LineError{File: m.File, Line: m.HeaderLine, Field: "all_gpus",
				Err: fmt.Errorf("the job's %d GPUs do not fit the topology's %d (--place %s)", m.AllGPUs, top.GPUs, c.Place)}
		}
		world = m.AllGPUs
	}
	if world > top.GPUs {
		return p, 0, fmt.Errorf("--place %s: the job's %d ranks do not fit the topology's %d GPUs", c.Place, world, top.GPUs)
	}
	return p, world, nil
}

// rec is a record read from the input, forwarded as it is.
type rec struct {
	kind string
	raw  []byte
}

// write writes the output stream: the input's records (the topology
// re-encoded, the others as they came), then what body adds.
func (c *command) write(top *stream.Topology, fwd []rec, body func(*stream.Writer) error) error {
	return cli.WriteStream(c.Out, "simccl-decompose", func(sw *stream.Writer) error {
		for _, f := range fwd {
			var err error
			if f.kind == stream.KindTopology {
				err = sw.Topology(top)
			} else {
				err = sw.RawRecord(f.kind, f.raw)
			}
			if err != nil {
				return err
			}
		}
		return body(sw)
	})
}

type discard struct{}

func (discard) Flow(*stream.Flow) error { return nil }

// newDecomposer plans with NCCL's model on fab's servers and lays the
// collectives out as layout says.
func newDecomposer(model nccl.ServerModel, fab collective.Fabric, layout workload.Layout, opt collective.Options) (*collective.Decomposer, error) {
	planner, err := collective.NewPlanner(model, fab, opt)
	if err != nil {
		return nil, err
	}
	return collective.NewDecomposer(fab, layout, planner)
}
