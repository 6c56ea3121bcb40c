// Package stream implements fabricsim's msgpack flow stream: the records
// every program passes over stdin/stdout (see formats/stream.md).
package stream

// Format and Version identify the stream in its header record.
const (
	Format  = "fabricsim/stream"
	Version = 4
	// MinVersion is the oldest version readers accept: version 1 streams
	// never carry delay_ps on a transfer, so they read the same under 2.
	MinVersion = 1
)

// Record kinds, in the order they appear in a stream.
const (
	KindHeader     = "header"
	KindTopology   = "topology"
	KindPaths      = "paths"
	KindJob        = "job"
	KindGroup      = "group"
	KindCollective = "collective"
	KindFlow       = "flow"
	KindTrailer    = "trailer"
	KindNote       = "note"
)

// Header is always the first record.
type Header struct {
	Format   string `msgpack:"format"`
	Version  int    `msgpack:"version"`
	Producer string `msgpack:"producer"`
}

// Node kinds.
const (
	NodeGPU      = "gpu"
	NodeNVSwitch = "nvswitch"
	NodeSwitch   = "switch"
)

// Link kinds.
const (
	LinkNVLink = "nvlink"
	LinkPCIe   = "pcie"
	LinkNIC    = "nic"
	LinkFabric = "fabric"
)

// Node is one vertex of the fabric. Node ids are dense: node i has ID i.
// Following SimAI, GPUs come first (GPU id == global rank), then NVSwitches,
// then network switches.
type Node struct {
	ID     int32
	Kind   string // gpu | nvswitch | switch
	Role   string // gpu, nvswitch, asw, psw, edge, agg, core, router, switch
	Tier   int8   // 0 GPU, 1 NVSwitch, 2 first network tier (ASW/edge/router), 3, 4 ...
	Server int32  // server index for GPUs and NVSwitches, -1 for network switches
	Group  int32  // segment, pod or dragonfly group the node belongs to, -1 if none
	Plane  int8   // network plane (dual-plane fabrics), -1 if none
}

// Link is a full-duplex link; BWbps applies to each direction.
type Link struct {
	A, B      int32
	BWbps     float64
	LatencyPs int64
	ErrorRate float64
	Kind      string // nvlink | pcie | nic | fabric
}

// Topology is the fabric: one record per stream.
type Topology struct {
	Family              string            `msgpack:"family"`
	Params              map[string]string `msgpack:"params"`
	GPUs                int               `msgpack:"gpus"`
	GPUsPerServer       int               `msgpack:"gpus_per_server"`
	NVSwitchesPerServer int               `msgpack:"nvswitches_per_server"`
	GPUType             string            `msgpack:"gpu_type"`
	Nodes               []Node            `msgpack:"nodes"`
	Links               []Link            `msgpack:"links"`
}

// Job names one job of the stream (simccl-decompose --job, --merge):
// its groups, collectives and flows are those with ids from its First*
// up to the next job record's (the last job's: to the end). A flow
// belongs to its collective's job; one of no collective (a join), to the
// job its id falls in. StartPs is when the job starts: a merged stream
// holds it as the job's first flow, a delay node every flow of the job
// without deps waits for.
type Job struct {
	Name            string `msgpack:"name"`
	StartPs         int64  `msgpack:"start_ps"`
	FirstGroup      int64  `msgpack:"first_group"`
	FirstCollective int64  `msgpack:"first_collective"`
	FirstFlow       int64  `msgpack:"first_flow"`
}

// Note is what a producer left out of, or assumed in, the stream it
// wrote (an input's nodes it could not run, dependencies it dropped): an
// incomplete result says so, and backends carry the notes into their
// traces' metadata (fabricsim.notes) for fctstats to print.
type Note struct {
	Producer string `msgpack:"producer"` // the program, e.g. simccl-decompose
	Text     string `msgpack:"text"`
}

// MaxNotes and MaxNoteBytes bound a stream's notes (readers refuse more).
const (
	MaxNotes     = 256
	MaxNoteBytes = 4096
)

// Group is a communicator.
type Group struct {
	ID    int64   `msgpack:"id"`
	Type  string  `msgpack:"type"` // TP, DP, PP, EP, DP_EP
	Ranks []int32 `msgpack:"ranks"`
	// Siblings (collective granularity): the ids of the identical groups
	// of the other ranks of this group's pipeline stage, which run each
	// of its collectives at the same time. Written only on the groups
	// COLL flows name; a backend prices the fabric with all of them.
	Siblings []int64 `msgpack:"siblings,omitempty"`
}

// Collective is one collective operation of one group.
type Collective struct {
	ID          int64  `msgpack:"id"`
	Op          string `msgpack:"op"`
	Size        int64  `msgpack:"size"`
	Group       int64  `msgpack:"group"`
	Algorithm   string `msgpack:"algorithm"`
	Protocol    string `msgpack:"protocol"`
	Channels    int    `msgpack:"channels"`
	PredictedPs int64  `msgpack:"predicted_ps"`
	// PXN: ring traffic between servers goes through the sender's GPU on
	// the receiver's rail (NCCL's PXN); a model pricing the fabric needs it.
	PXN   bool   `msgpack:"pxn,omitempty"`
	Label string `msgpack:"label"` // workload layer and phase, free text
	// SendLatPs: SimAI replay (simccl-decompose --send-lat / AS_SEND_LAT):
	// every transfer of the collective starts this long after its
	// dependencies, in place of NCCL's latencies; 0 when off.
	SendLatPs int64 `msgpack:"send_lat_ps,omitempty"`
	// FabricLatPs: at collective granularity, the part of a COLL node's
	// delay that a link carrying its bytes idles through (a tree's first
	// piece's latencies along its path, its base latency included), when
	// its bytes go beside its pace; a backend pricing the fabric then
	// takes the longer of the delay and this plus the busiest link's
	// bytes, instead of adding the fabric's extra (0: it adds it).
	FabricLatPs int64 `msgpack:"fabric_lat_ps,omitempty"`

	// Training-iteration position (stream version 3). Readers of older
	// streams get Layer, Microbatch and Stage -1 and empty strings.
	Layer      int32  `msgpack:"layer"`      // workload layer index (line order), -1 if none
	LayerName  string `msgpack:"layer_name"` // the layer's name in the workload
	Phase      string `msgpack:"phase"`      // fwd, ig, wg, pp, or ""
	Microbatch int32  `msgpack:"microbatch"` // -1 for iteration-level work
	Stage      int32  `msgpack:"stage"`      // pipeline stage, -1 if none

	// Cut is how simccl-decompose cuts the collective into flows, written
	// at collective granularity so that a backend can expand a COLL node
	// into the flows flow granularity would have held; nil when absent.
	Cut *Cut `msgpack:"cut,omitempty"`
}

// Cut is the part of a collective's plan its flows depend on beyond the
// record's algorithm, protocol, channels and pxn.
type Cut struct {
	ChunkBytes int64 `msgpack:"chunk_bytes"` // NCCL's chunk for the plan (0: the algorithm has none)
	MaxChunks  int64 `msgpack:"max_chunks"`  // simccl-decompose --max-chunks (0: no cap)
	// Step latencies, all 0 without launch latency: NCCL's base latency
	// on a delay node at each rank's entry, and each transfer's per-hop
	// latency inside a server and between servers.
	BaseLatPs  int64 `msgpack:"base_lat_ps"`
	IntraLatPs int64 `msgpack:"intra_lat_ps"`
	InterLatPs int64 `msgpack:"inter_lat_ps"`
	// The NCCL transport's steps (version 4 streams may lack them: 0, no
	// per-step cost): a step's wire bytes (buffer / NCCL_STEPS for the
	// protocol) and what each step costs a transfer inside a server and
	// between servers; a transfer pays ceil(wire bytes / step_bytes) steps.
	StepBytes   int64 `msgpack:"step_bytes"`
	StepIntraPs int64 `msgpack:"step_intra_ps"`
	StepInterPs int64 `msgpack:"step_inter_ps"`
	// StepSerialPs: a ring thread block's fixed work per slice, in series
	// with the slice's bytes on its connection (0 or absent: none).
	StepSerialPs int64 `msgpack:"step_serial_ps,omitempty"`
	// StepProxyPs: a proxy thread's occupancy per network step, in series
	// over all of a GPU's NVLS-Tree network connections (0 or absent:
	// none).
	StepProxyPs int64 `msgpack:"step_proxy_ps,omitempty"`
	// StepPacePs: an AllToAll network connection's steady step interval,
	// its slowest stage (0 or absent: StepInterPs, as before it).
	StepPacePs int64 `msgpack:"step_pace_ps,omitempty"`
	// MaxRecvs: how many of an AllToAll proxy's receives from one remote
	// proxy one network receive takes (0 or absent: one each).
	MaxRecvs int64 `msgpack:"max_recvs,omitempty"`
	// StepTreeFs: a tree LL128 AllReduce's thread block time per wire
	// byte of one input (fs), with StepSerialPs its step's fixed work (0
	// or absent: the tree's steps are paced by their step cost); for an
	// NVLS-Tree AllReduce a loop's GPU work per shard byte, StepSerialPs
	// its fixed part.
	StepTreeFs int64 `msgpack:"step_tree_fs,omitempty"`
	// StepTreeShare: 1 when a tree LL AllReduce's connection's first piece
	// pays only its share of the step cost under StepTreeFs (--transport
	// tree-ll-first=share), 0 or absent: the whole step.
	StepTreeShare int64 `msgpack:"step_tree_share,omitempty"`
	// StepTreeWhole: 1 when a tree LL128 AllReduce's network step leaves
	// only once its sender's block has written all of it, so a
	// connection's first piece across servers also waits one NCCL step's
	// work under StepTreeFs (--transport tree-ll128-send=whole); 0 or
	// absent: it does not.
	StepTreeWhole int64 `msgpack:"step_tree_whole,omitempty"`
	// LaunchFloorPs: the shortest the collective takes when one process
	// launches it on several GPUs in turn (0 or absent: none).
	LaunchFloorPs int64 `msgpack:"launch_floor_ps,omitempty"`
	// NVLinkLockPs: the shortest a multi-server LL or LL128 ring takes
	// when its NVLink, not its NIC, paces its channels in phase (0 or
	// absent: its NIC does); a backend pricing a COLL node takes the
	// longer of it and its delay with what the fabric adds.
	NVLinkLockPs int64 `msgpack:"nvlink_lock_ps,omitempty"`
	// RingConnPs: a multi-server LL or LL128 ring's network connection
	// running its own steps in order, each its fixed work and its bytes at
	// the NIC's share (0 or absent: not such a ring); a backend whose
	// fabric slows those bytes further (an oversubscribed uplink under an
	// even split) slows every one of these steps, and only the network
	// hops of the datum's path.
	RingConnPs int64 `msgpack:"ring_conn_ps,omitempty"`
	// FirstFlow is the id flow granularity gives the collective's first
	// flow (its group's, then its siblings' follow): an expanded flow's id
	// is FirstFlow plus its index in the expansion, so that ECMP, which
	// hashes ids, puts it on the path flow granularity's would take. nil
	// in streams written before the field.
	FirstFlow *int64 `msgpack:"first_flow,omitempty"`
}

// OpCompute is the op of the pseudo-collective a compute phase's delay
// nodes belong to: one per stage, layer, phase and microbatch.
const OpCompute = "compute"

// Flow connection types.
const (
	ConnRing     = "RING"
	ConnTree     = "TREE"
	ConnNVLS     = "NVLS"
	ConnPXNInit  = "PXN_INIT"
	ConnNet      = "NET"
	ConnPXNFinal = "PXN_FINAL"
	ConnA2A      = "A2A"
	ConnP2P      = "P2P"
	ConnMSCCL    = "MSCCL"
	ConnDelay    = "DELAY"
	// ConnColl is a whole collective at collective granularity (stream
	// version 4): one node on the rank that represents its pipeline stage,
	// size the collective's size, delay_ps its time in NCCL's model.
	ConnColl = "COLL"
)

// Flow is one point-to-point transfer of the DAG, or a pure delay node
// (Size 0, DelayPs > 0). On a transfer (Size > 0) DelayPs is the step's
// fixed latency (NCCL's per-hop hardware latency), path propagation
// included. It is encoded as a positional array.
type Flow struct {
	ID         int64
	Collective int64
	Src, Dst   int32
	Size       int64
	Deps       []int64
	Channel    int32
	Chunk      int32
	ChunkCount int32
	ConnType   string
	DelayPs    int64
	// PacePs (transfers only, 0 for none) is how long after this
	// transfer starts sending its connection's next transfer (a dependant
	// with the same src, dst and channel) may start at the earliest: the
	// NCCL transport's throughput limit, steps x minimum step interval
	// (pkg/collective/transport.go). Encoded as a 12th element when not 0.
	PacePs int64
}

// Trailer closes a stream with the number of records of each kind written
// (header and trailer not counted).
type Trailer struct {
	Counts map[string]int64 `msgpack:"counts"`
}
