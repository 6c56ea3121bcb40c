// Command flowsim-analytical runs a flow stream's DAG on an analytical
// model of the fabric (contention-free busbw or max-min fair fluid) and
// writes the flow trace fabricsim.flows/v3.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/analytical"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	progress.Quiet
	Model      string         `default:"fluid" enum:"fluid,busbw" help:"fluid: every link shared max-min fairly among the flows crossing it, recomputed at each flow start and finish (shows incast, ECMP collisions, oversubscription). busbw: no contention, a flow takes its path latency plus size over its bottleneck bandwidth (SimAI-analytical-like, fastest)."`
	Out        string         `short:"o" placeholder:"FILE" help:"Write the trace to FILE: .parquet or .pq (Parquet), .arrow (Arrow IPC file), .arrows (Arrow IPC stream). Default: Arrow IPC stream on stdout."`
	Seed       uint64         `default:"1" help:"Seed of the ECMP hash that pins each flow to one of its equal-cost paths (the same paths flowsim-packet's queue pairs take with that seed); the only randomness of a run."`
	Routing    string         `default:"ecmp" enum:"ecmp,spray,flowlet,adaptive" placeholder:"POLICY" help:"How flows take equal-cost paths, as flowsim-packet's ROUTING: ecmp (default) and flowlet (a fluid flow never idles) pin a flow to its hashed path; spray splits its bytes evenly over the paths; adaptive splits them evenly, hop by hop, over the least loaded next hops when it starts. At collective granularity ecmp and flowlet price the mean bottleneck over draws of the connections' hashes, spray and adaptive the even split."`
	ECMPKey    string         `name:"ecmp-key" default:"transfer" enum:"transfer,connection" placeholder:"KEY" help:"What an ECMP hash (--routing ecmp, flowlet) is drawn for at flow granularity and with --expand: transfer (default: every transfer on a path of its own, as SimAI's ns-3 opens a queue pair per flow) or connection (a GPU pair's channel: NCCL keeps one queue pair per connection, NCCL_IB_QPS_PER_CONNECTION=1, so all its chunks take one path and a collision lasts the whole collective). The trace's params say ecmp_key when connection."`
	Expand     bool           `help:"On a collective-granularity stream, run each COLL node as the flows flow granularity would hold (its group and sibling groups, cut as simccl-decompose cuts them), made when it is released and freed when they finish: flow-level fidelity with memory that follows the collectives in flight. The trace keeps one row per COLL node."`
	Lockstep   bool           `name:"approx-lockstep" help:"APPROXIMATE, with --expand under fluid: the sibling groups of a COLL node that share a layout (size, ranks per server, relative GPU indexes) move in lockstep with the first of them, each of its flows sent with its siblings' matching flows as one flow over all their own paths (ECMP-hashed as at flow granularity) at one rate (--lockstep-rate). Exact where the groups would run at the same rates anyway (an even split on a symmetric fabric, groups on rails of their own); elsewhere within about 16% under or 47% over, by --lockstep-rate (measured, see README). One group's flows and events per class instead of every group's. The trace (fabricsim.approximate), the summary line and fctstats say so."`
	LockGroups int            `name:"lockstep-groups" placeholder:"N" help:"With --approx-lockstep, at most N groups per lockstep class (0, the default: all the sibling groups of a layout). Fewer groups per class couple less and cost more (at --lockstep-rate slowest, each step waits for the slowest of N groups' ECMP draws, not of all)."`
	LockRate   string         `name:"lockstep-rate" default:"representative" enum:"representative,slowest" help:"With --approx-lockstep, what sets a class's common rate: representative (the default: the representative's path alone; the members' other links carry their load, held to each link's fair share when it saturates: the members fare as the representative does, a typical group; 10-16% under the full run under ECMP on a k=16 fat-tree) or slowest (every member's path: each step waits for the unluckiest member's ECMP collisions; 31-47% over, 7-10% with --lockstep-groups 2)."`
	Symmetry   bool           `default:"true" negatable:"" help:"With --expand under fluid, a COLL node whose sibling groups each sit inside one server on NVLinks of their own (TP groups) runs its first group only, which ends when they all would: exact, and most of a TP-heavy iteration's flows. --no-symmetry runs every group."`
	Reuse      bool           `help:"With --expand under fluid, a COLL node's group that stands for its siblings (--symmetry) and ran the same collective (operation, size, cut) alone on its links before takes the time it took then, to the picosecond, instead of running its flows again (an EP AllToAll repeats per layer and microbatch): exact, every trace row the same, but rows that end in the same picosecond may come in another order, hence off by default. Not with --link-loads (the group's flows are not run)."`
	AReuse     bool           `name:"approx-reuse" help:"APPROXIMATE, with --expand under fluid: a COLL node takes the time, release to end, of the first node run of the same collective (operation, size, cut) on groups placed alike (the same ranks per server, and the same servers in the same segments and planes, up to a translation: each pipeline stage's DP and DP_EP rings, which symmetry cannot run by one group) instead of running its flows (waiting for that time if that node still runs); not a node some of whose groups run for themselves because a pipeline transfer may overlap them. What it loses: its own ECMP draws, and the load it would put on links other nodes share. The trace (fabricsim.approximate), the summary line and fctstats say so. Not with --link-loads, --link-down or --link-scale."`
	Merge      bool           `name:"merge-channels" help:"With --expand under fluid, the ring channels of a group that make the same flows (same ring order, same bytes: NCCL's 16 channels of a DP ring in 4 orders) move as one flow weighted by their count: exact, checked at every rate solve (should a link only some of them cross ever limit them, the run is repeated with those collectives' shapes unmerged). The times are the unmerged run's up to rounding (a weighted link's sums: 1 ns here and there), hence off by default."`
	AReuseIdle bool           `name:"approx-reuse-idle" help:"APPROXIMATE, with --approx-reuse: also a COLL node some of whose groups run for themselves because a pipeline transfer may overlap them (a stage's first rank's EP AllToAll and TP groups) takes the time of the first one placed alike, when no stream transfer is in flight on their GPUs at its release; a time is kept only from a run no transfer met. What it loses beyond --approx-reuse: a transfer that starts during such a node neither slows it nor is slowed by it. The trace (fabricsim.approximate), the summary line and fctstats say so."`
	ARails     bool           `name:"approx-rails" help:"APPROXIMATE, with --expand under fluid, on a rail-optimized fabric whose rails are alike (checked: Spectrum-X): of a COLL node whose groups run in full, only its groups on the first rails run when those on the other rails are their images under a relabelling of the rails (SimAI's example's DP rings: one of its two TP ranks' rings; its DP_EP rings: one rail's 4 of 32); the node ends when they do. What it loses: the other rails' own ECMP draws on the spines, and the load they would put on links other nodes share. The trace (fabricsim.approximate), the summary line and fctstats say so. Not with --approx-lockstep, --link-loads, --link-down or --link-scale."`
	ARotate    bool           `name:"approx-pod-rotation" help:"APPROXIMATE, with --expand under fluid, on a fat-tree whose servers fill a multiple of GPUs-per-server pods alike (checked: the rotation that moves every server's GPU index l to l+1 and each of those pods by pods/GPUs-per-server must map the fabric onto itself; topogen's fat-trees at 512 or 1024 GPUs with --fat-tree-k 16, 4096 or 8192 with 32): of a COLL node whose groups are the images of its first under that rotation (GPT-13B's DP rings, one per GPU index), only the first runs, and each link it takes stands for its orbit's links, so that the node runs as if every other group's ECMP draws were the first group's moved by pods; the groups at one edge still draw independently. What it loses: each group's own draws (every group has the first one's, in other pods, and the groups end together), and other nodes' loads on the orbits' other links. The trace (fabricsim.approximate), the summary line and fctstats say so. Not with --approx-lockstep, --approx-rails, --routing adaptive, --link-loads, --link-down or --link-scale."`
	MergeAppx  bool           `name:"approx-merge-channels" help:"APPROXIMATE, with --expand under fluid: merge ring channels as --merge-channels does, but where a link only some of a class's channels cross limits them (ECMP collisions on the spines), move the class at that rate instead of running again unmerged: each of its steps waits for its slowest channel. The trace (fabricsim.approximate), the summary line and fctstats say so."`
	Links      string         `name:"link-loads" placeholder:"FILE" help:"Also write how many bytes every directed link carried, by group type and op, with its busy time and utilization over the run, to FILE (.parquet or .pq, or .csv; formats/links.md): which tier the workload loads, and with what. fctstats --links reads it. A COLL node's bytes are its traffic matrix as priced (under ecmp, the mean over the hash draws); expanded flows and flows their paths."`
	SendLat    units.Duration `name:"send-lat" placeholder:"TIME" help:"Latency added before each transfer starts moving data, on top of the stream's step latencies. When absent, SimAI's AS_SEND_LAT (us) is read, unless simccl-decompose already applied it in their place (SimAI replay: set it for simccl-decompose)."`
	LinkDown   []string       `name:"link-down" placeholder:"A-B@TIME" help:"Fail the link between nodes A and B (node ids, as flowsim-packet's LINK_DOWN names them) at TIME (with its unit: 2ms; @0s or no @: from the start); repeatable. Flows sending over it move, with the bytes they have left, to the equal-cost paths that remain (hashed anew, as packet's queue pairs); a flow with no path left fails (trace status failed) and the run exits 1 after writing the trace, as flowsim-packet. At collective granularity the COLL nodes released later are priced without it, and under fluid those in flight are re-priced."`
	LinkScale  []string       `name:"link-scale" placeholder:"A-B=FACTOR[@TIME]" help:"Multiply the bandwidth of the link between nodes A and B by FACTOR (> 0; 0.5 halves it) in both directions, for the whole run, or from TIME on with A-B=FACTOR@TIME (the flows on it re-solved then; FACTOR always of the nominal bandwidth); repeatable."`
	Input      string         `arg:"" optional:"" placeholder:"STREAM" help:"Stream file to read (default: stdin)."`
	// For finding where the time goes at scale (go tool pprof).
	CPUProfile string `name:"cpuprofile" hidden:"" placeholder:"FILE"`
}

const description = `Simulate a flow stream on an analytical model of its fabric and write the flow trace.

Reads the fabricsim stream (topology, optional groups and collectives, flows), releases each
flow when its deps are done, routes it over shortest paths (--routing: ECMP pinned by
--seed by default, NVLink inside a server) and writes one trace row per flow (fabricsim.flows/v3): start, end, FCT and
the ideal FCT (path latency + size over bottleneck bandwidth). A summary line goes to stderr.
A collective-granularity stream (simccl-decompose --granularity collective) runs each COLL
node for NCCL's model time plus what the fabric beyond the NICs adds (its traffic on the
stage's groups over the equal-cost paths as --routing takes them: oversubscribed uplinks,
spines, ECMP collisions); under fluid, collectives in flight share the links they load.

Examples:
  topogen --family spectrum-x --gpus 128 | simccl-decompose --op allreduce --size 64MiB | flowsim-analytical | fctstats
  flowsim-analytical --model busbw --out run.parquet flows.stream
  topogen --gpus 9216 | simccl-decompose --workload examples/workloads/simai_workload_analytical.txt --granularity collective | flowsim-analytical | fctstats --iteration`

func main() {
	var c command
	cli.Main("flowsim-analytical", description, &c, c.run)
}

func (c *command) run() error {
	model, err := analytical.ParseModel(c.Model)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	routing, err := route.ParsePolicy(c.Routing)
	if err != nil {
		return cli.Usagef("--routing %v", err)
	}
	ecmpKey, err := route.ParseHashKey(c.ECMPKey)
	if err != nil {
		return cli.Usagef("--ecmp-key %v", err)
	}
	if err := cli.CheckTraceOut(c.Out); err != nil {
		return err
	}
	if c.Links != "" {
		if _, err := links.Format(c.Links); err != nil {
			return cli.Usagef("--link-loads: %v", err)
		}
	}
	stop, err := cli.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	wall := time.Now()
	sr, rc, err := cli.OpenStream(c.Input, "pipe a stream in, e.g. topogen | simccl-decompose | flowsim-analytical")
	if err != nil {
		return err
	}
	defer rc.Close()
	meter := c.Meter("flowsim-analytical")
	defer meter.Stop()
	meter.Phase("reading " + sr.Name())
	limit, err := cli.MemoryBudget()
	if err != nil {
		return err
	}
	// Measured: 1.82 M flows (AICB GPT-13B, 16 GPUs) take 347 MB.
	in, err := flowset.ReadBudget(sr, flowset.Budget{Backend: "flowsim-analytical", PerFlow: 200, Limit: limit, Expands: true})
	meter.Hide() // for the warnings below
	if err != nil {
		return err
	}
	if err := in.RefuseEmpty("flowsim-analytical"); err != nil {
		return err
	}
	faults, err := c.faults(in.Topology)
	if err != nil {
		return err
	}
	sendLat, err := cli.BackendSendLatency("flowsim-analytical", int64(c.SendLat), in.Collectives)
	if err != nil {
		return err
	}
	if c.Expand && in.CollNodes == 0 {
		fmt.Fprintf(os.Stderr, "flowsim-analytical: warning: --expand: %s has no COLL nodes (flow granularity); its flows run as they are\n", sr.Name())
	}
	if c.Lockstep && (!c.Expand || model != analytical.Fluid) {
		return cli.Usagef("--approx-lockstep needs --expand and --model fluid")
	}
	if c.Lockstep && (len(c.LinkDown) > 0 || len(c.LinkScale) > 0) {
		// A failed or slowed link makes the members of a class differ.
		return cli.Usagef("--approx-lockstep does not take --link-down or --link-scale: run faults without it")
	}
	if (c.Merge || c.MergeAppx) && (!c.Expand || model != analytical.Fluid || c.Lockstep) {
		return cli.Usagef("--merge-channels needs --expand and --model fluid, without --approx-lockstep")
	}
	if c.AReuse && (!c.Expand || model != analytical.Fluid || c.Links != "" || len(c.LinkDown) > 0 || len(c.LinkScale) > 0) {
		// A reused node loads no link, and faults make nodes unlike.
		return cli.Usagef("--approx-reuse needs --expand and --model fluid, without --link-loads, --link-down or --link-scale")
	}
	if c.AReuseIdle && !c.AReuse {
		return cli.Usagef("--approx-reuse-idle needs --approx-reuse")
	}
	if c.ARails && (!c.Expand || model != analytical.Fluid || c.Lockstep || c.Links != "" || len(c.LinkDown) > 0 || len(c.LinkScale) > 0) {
		// The other rails' groups load no link, and faults make rails unlike.
		return cli.Usagef("--approx-rails needs --expand and --model fluid, without --approx-lockstep, --link-loads, --link-down or --link-scale")
	}
	if c.ARotate && (!c.Expand || model != analytical.Fluid || c.Lockstep || c.ARails || routing == route.Adaptive || c.Links != "" || len(c.LinkDown) > 0 || len(c.LinkScale) > 0) {
		// The images load no link but their orbit's first, which adaptive
		// routing and the link loads would read, and faults break the rotation.
		return cli.Usagef("--approx-pod-rotation needs --expand and --model fluid, without --approx-lockstep, --approx-rails, --routing adaptive, --link-loads, --link-down or --link-scale")
	}
	if c.LockGroups < 0 || (c.LockGroups > 0 && !c.Lockstep) {
		return cli.Usagef("--lockstep-groups %d: a positive count of groups, with --approx-lockstep", c.LockGroups)
	}
	opt := analytical.Options{Model: model, Seed: c.Seed, Routing: routing, ECMPKey: ecmpKey, SendLat: des.Time(sendLat), Expand: c.Expand, MemoryLimit: limit, NoSymmetry: !c.Symmetry, Reuse: c.Reuse,
		LinkLoads: c.Links != "", Faults: faults, ApproxLockstep: c.Lockstep, LockstepGroups: c.LockGroups, MergeChannels: c.Merge, ApproxMergeChannels: c.MergeAppx,
		ApproxReuse: c.AReuse, ApproxRails: c.ARails, ApproxReuseIdle: c.AReuseIdle, ApproxPodRotation: c.ARotate}
	if faults != nil {
		// A degraded or failed link breaks the sameness of sibling groups.
		opt.NoSymmetry = true
	}
	if c.LockRate == "slowest" {
		opt.LockstepRate = analytical.SlowestMember
	}
	meta := analytical.MetaFaults(in, opt)
	meta.Rows = int64(in.Flows()) // every flow ends in a finished run
	w, err := cli.TraceWriter(c.Out, meta)
	if err != nil {
		return err
	}
	if meter != nil {
		opt.Progress = func(done, total int, now des.Time) {
			meter.Set(int64(done), int64(total), progress.Flows(now, 0, wall))
		}
	}
	aw := trace.Async(w)
	res, err := analytical.Run(in, opt, aw.Write)
	meter.Stop()
	var failed *analytical.FlowsFailed
	if errors.As(err, &failed) {
		err = nil // the trace is whole: its rows say which flows failed
	}
	if err != nil {
		trace.Abort(aw)
		return err
	}
	if err := aw.Close(); err != nil {
		return err
	}
	if c.Links != "" {
		gran := "flow"
		switch {
		case in.CollNodes > 0 && c.Expand:
			gran = "expanded"
		case in.CollNodes > 0:
			gran = "collective"
		}
		m := links.Meta{Backend: model.Backend(), Routing: routing.String(), MakespanNs: res.End.Ns(), Granularity: gran, Topology: in.TopologyMeta()}
		if failed != nil {
			m.FailedFlows, m.UndeliveredBytes = int64(res.Failed), res.FailedBytes
		}
		if err := links.Write(c.Links, m, res.Loads.Rows(faults.Topology(in.Topology), m.MakespanNs)); err != nil {
			return err
		}
	}
	if failed != nil { // the error is the one line said, as flowsim-packet's
		return fmt.Errorf("%v; the trace marks %d failed flows (status failed, %d bytes never delivered)", failed, res.Failed, res.FailedBytes)
	}
	for _, m := range res.Warnings {
		fmt.Fprintf(os.Stderr, "flowsim-analytical: warning: %s\n", m)
	}
	expanded := ""
	if res.Expanded > 0 {
		expanded = fmt.Sprintf(" (COLL nodes expanded into %d flows, at most %d held at once)", res.Expanded, res.PeakExpanded)
		if res.Mirrored > 0 {
			expanded = fmt.Sprintf(" (COLL nodes expanded into %d flows, at most %d held at once; %d of them not run: in %d COLL nodes a group alone on links of its own (its server's NVLinks, or its rails) stood for its siblings)",
				res.Expanded, res.PeakExpanded, res.Mirrored, res.SymmetricNodes)
		}
		if res.ReusedNodes > 0 {
			expanded += fmt.Sprintf(" %d flows of a group standing for its siblings not run either: in %d COLL nodes it took the time it took on the same collective before;", res.ReusedFlows, res.ReusedNodes)
		}
	}
	if res.ChannelsMerged > 0 && !c.MergeAppx {
		expanded += fmt.Sprintf(" %d flows of ring channels moved with an identical channel's (exact, checked);", res.ChannelsMerged)
	}
	if c.MergeAppx && res.ChannelsMerged > 0 {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-merge-channels): %d flows of ring channels moved with an identical channel's; in %d solves a link only some of a class's channels cross limited them all;", res.ChannelsMerged, res.MergeInexact)
	}
	switch {
	case res.MergeRerun && res.MergeSkipped > 0:
		expanded += fmt.Sprintf(" ring channels of %d collective shapes ran unmerged after %d runs (merged, a link only some of a class's flows cross limited them);", res.MergeSkipped, res.MergeReruns+1)
	case res.MergeRerun:
		expanded += " ring channels ran unmerged (merged, a link only some of a class's flows cross limited them);"
	}
	if res.LockstepNodes > 0 {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-lockstep): in %d COLL nodes, %d flows of sibling groups moved in lockstep with %d representative groups' flows;",
			res.LockstepNodes, res.LockstepMembers, res.LockstepClasses)
	}
	if c.AReuse {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-reuse): %d flows not run: %d COLL nodes took the time of the first one of their collective on groups placed alike (%d of them waited for it to end);",
			res.ApproxReusedFlows, res.ApproxReusedNodes, res.ApproxWaited)
	}
	if c.AReuseIdle {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-reuse-idle): %d of those a pipeline transfer may overlap; a transfer met %d of them, whose groups ran from then on;", res.ApproxIdle, res.ApproxMet)
	}
	if c.ARails {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-rails): %d flows of groups on other rails not run: in %d COLL nodes the groups on the first rails stood for their images;", res.RailFlows, res.RailNodes)
	}
	if c.ARotate {
		expanded += fmt.Sprintf(" APPROXIMATE (--approx-pod-rotation): %d flows of groups that are images of a node's first group under a rotation of GPU indexes and pods not run: in %d COLL nodes the first group's flows loaded their links' orbits;", res.RotFlows, res.RotNodes)
	}
	fmt.Fprintf(os.Stderr, "flowsim-analytical: %s: %d flows%s, %s, simulated %s, wall %.2f s\n",
		model, res.Flows, strings.TrimSuffix(expanded, ";"), units.HumanSize(res.Bytes), res.End, time.Since(wall).Seconds())
	return nil
}

// faults reads --link-down and --link-scale against the stream's topology
// (nil when neither is given).
func (c *command) faults(t *topo.Topology) (*analytical.Faults, error) {
	if len(c.LinkDown) == 0 && len(c.LinkScale) == 0 {
		return nil, nil
	}
	fs := &analytical.Faults{}
	for _, s := range c.LinkDown {
		d, err := analytical.ParseLinkDown(t, s)
		if err != nil {
			return nil, fmt.Errorf("--link-down %s: %v", s, err)
		}
		fs.Down = append(fs.Down, d)
	}
	for _, s := range c.LinkScale {
		l, err := analytical.ParseLinkScale(t, s)
		if err != nil {
			return nil, fmt.Errorf("--link-scale %s: %v", s, err)
		}
		fs.Scale = append(fs.Scale, l)
	}
	return fs, nil
}
