// Command flowsim-packet runs a flow stream's DAG on a packet-level RoCEv2
// model of the fabric (queue pairs with window and rate control, DCQCN and
// the other SimAI congestion controls, RED/ECN, PFC, ECMP, NVSwitch paths,
// NACK and go-back-N) and writes the flow trace fabricsim.flows/v3.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/fabricsim/fabricsim/formats/simaifct"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/confkey"
	"github.com/fabricsim/fabricsim/internal/cpuidle"
	"github.com/fabricsim/fabricsim/internal/outfile"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/packet"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	progress.Quiet
	Conf       string         `type:"existingfile" placeholder:"FILE" help:"SimAI.conf-style configuration (KEY value per line); SimAI's shipped SimAI.conf is accepted as is. Default: SimAI.conf's values."`
	Set        []string       `placeholder:"KEY=VALUE" help:"Override one configuration key, e.g. --set CC_MODE=8 --set BUFFER_SIZE=16 (repeatable)."`
	Out        string         `short:"o" placeholder:"FILE" help:"Write the trace to FILE (.parquet, .arrow, .arrows). Default: Arrow IPC stream on stdout."`
	MonitorDir string         `placeholder:"DIR" help:"Write monitor traces (qlen, host_bw, qp_rate, cnp, pfc .parquet) into DIR, sampled as MON_START/MON_END/*_MON_INTERVAL say."`
	SimAIFCT   string         `name:"simai-fct" placeholder:"FILE" help:"Also write SimAI's fct.txt lines (src_ip dst_ip sport dport size start_ns fct_ns standalone_fct_ns) to FILE. A run that stopped early (SIMULATOR_STOP_TIME) writes its finished transfers after a first line '# fabricsim: PARTIAL: the run stopped early; N transfers never finished and have no line', which fctstats reads as a partial trace."`
	Seed       uint64         `default:"1" help:"Seed of ECMP hashing, RED marking and link errors."`
	Routing    string         `enum:",ecmp,spray,flowlet,adaptive" default:"" placeholder:"POLICY" help:"How switches take equal-cost paths, as the ROUTING key (this flag wins over it): ecmp (default) pins a queue pair to a hashed path, spray hashes every packet, flowlet re-picks after an idle gap, adaptive sends each packet to the least loaded egress. flowsim-analytical takes the same flag."`
	ECMPKey    string         `name:"ecmp-key" enum:",transfer,connection" default:"" placeholder:"KEY" help:"What a queue pair's ECMP hash is drawn for, as the ECMP_KEY key (this flag wins over it): transfer (default: every transfer opens its own queue pair, as SimAI) or connection (a GPU pair's channel: NCCL keeps one queue pair per connection, so all its transfers take one path). flowsim-analytical takes the same flag; with the same --seed both route each transfer alike."`
	SendLat    units.Duration `name:"send-lat" placeholder:"TIME" help:"Latency added before each transfer starts moving data, on top of the stream's step latencies. When absent, SimAI's AS_SEND_LAT (us) is read, unless simccl-decompose already applied it in their place (SimAI replay: set it for simccl-decompose)."`
	Surrogate  string         `placeholder:"START:END|auto" help:"Hybrid simulation: between these times (e.g. 2ms:8ms) packets skip the fabric and arrive after the average latency measured before START for their source, destination and kind, and transfers opened meanwhile skip their queue pairs too (their bytes leave the NIC at line rate, or at the rate the fabric delivered a port's data while tracking when it saturated that port, and arrive, then are acknowledged, after those latencies); the fabric is suspended and resumes hot with its in-flight packets as zombies. auto: open it once the fabric is steady (mean packet latency and packets in flight within 10% over 3 windows of --surrogate-window, predicting from those windows) and close it when the number of transfers in progress (averaged over a window) moves by more than 20% (a new phase); it may open again. The switches are reported."`
	Lite       bool           `name:"surrogate-lite" help:"With --surrogate: do not suspend the fabric (it drains during the window and restarts empty)."`
	Track      units.Duration `name:"surrogate-track" placeholder:"TIME" help:"With --surrogate START:END: record latencies only this long before START (default: from the beginning)."`
	Window     units.Duration `name:"surrogate-window" placeholder:"TIME" help:"With --surrogate auto: the window of steady-state detection (default 100us)."`
	Expand     bool           `help:"On a collective-granularity stream, run each COLL node as the flows flow granularity would hold (its group and sibling groups, cut as simccl-decompose cuts them), made when it is released and freed when they finish: memory follows the collectives in flight. The trace keeps one row per COLL node, its ideal time NCCL's model time."`
	Symmetry   bool           `default:"true" negatable:"" help:"With --expand, a COLL node whose sibling groups each sit alone in their own server (TP groups, one per server), on NVLink routes that leave no choice, runs its first group only, which ends when they all would: exact (the same events, group for group), and most of a TP-heavy iteration's packets. Off with monitors, --surrogate, LINK_DOWN, per-packet routing or loss on NVLink. --no-symmetry runs every group."`
	Threads    int            `default:"1" placeholder:"N" help:"Run the simulation on N goroutines: the fabric cut into --partitions parts by the flows' load (leaves with their GPUs, tiers spread, or blocks of whole servers; a server whose GPUs send each other anything stays whole), each with its own event loop, run in windows as long as the shortest link between parts that may carry a packet (a conservative parallel simulation); stderr then gives the ideal speedup. Flow-level streams under PFC_MODE priority, without --expand, monitors, --surrogate or LINK_DOWN; every dependency must be released where its dependant starts (NCCL's rings and trees are)."`
	Partitions *int           `placeholder:"N" help:"Parts for --threads (default: as many as threads; at least as many). Every N gives the single loop's trace, byte for byte: events at one instant are ordered by the node that made them, not by when they were pushed. --partitions 1 is the single loop."`
	ParReport  string         `name:"parallel-report" placeholder:"FILE" help:"With --threads or --partitions: write a CSV line a window (start and end in ps, each part's events, the busiest part's, the wait at its barrier in ns) to FILE. The stderr summary gives the ideal speedup (events over the sum of each window's busiest part: a count, the same on any machine) either way."`
	LoopWindow string         `name:"loop-window" placeholder:"START:END" help:"Report the event loop's wall time, events and the process's CPU time while the simulated time is within START:END (e.g. 3ms:8ms): one part of a run timed in one process, as the surrogate pipeline compares its window with high fidelity's."`
	Keys       bool           `help:"List every configuration key (SimAI.conf's, fabricsim's and the congestion-control ones) with its type, unit, range, default and meaning, then exit."`
	Input      string         `arg:"" optional:"" placeholder:"STREAM" help:"Stream file to read (default: stdin)."`
	// For finding where time and bytes go at scale (go tool pprof). The
	// build's profile-guided optimization reads default.pgo beside this
	// file: CPU profiles of SimAI's three 128-GPU cases (issue 36; see
	// tests/bench_test.go), merged with go tool pprof -proto, taken with
	// GODEBUG=asyncpreemptoff=1. It made the event loop 15% faster; redo it
	// after large changes to the packet core.
	CPUProfile string `name:"cpuprofile" hidden:"" placeholder:"FILE"`
	MemProfile string `name:"memprofile" hidden:"" placeholder:"FILE"`
}

const description = `Simulate a flow stream packet by packet on a RoCEv2 fabric and write the flow trace.

Each flow becomes one or more RDMA queue pairs sending PACKET_PAYLOAD_SIZE packets under a
window and a rate set by congestion control (CC_MODE 1 DCQCN by default; 3 HPCC, 7 TIMELY,
8 DCTCP, 10 HPCC-PINT, 0 none). Switches have eight priority queues per port, a shared
buffer with dynamic PFC thresholds and RED/ECN marking per link rate; ECMP hashes each queue
pair onto one path; traffic inside a server crosses the NVSwitch. A flow completes when its
sender has the last ACK; its dependants start then.

Examples:
  topogen --gpus 128 --gpu-type A100 --nic-bw 100Gbps | simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 16 | flowsim-packet --conf examples/conf/default.conf | fctstats
  flowsim-packet --conf SimAI.conf --set CC_MODE=8 --monitor-dir mon/ --simai-fct fct.txt --out run.parquet flows.stream`

func main() {
	var c command
	cli.Main("flowsim-packet", description, &c, c.run)
}

func (c *command) config() (packet.Config, error) {
	cfg := packet.DefaultConfig()
	if c.Conf != "" {
		f, err := os.Open(c.Conf)
		if err != nil {
			return cfg, err
		}
		err = cfg.Read(f, c.Conf)
		f.Close()
		if err != nil {
			return cfg, err
		}
	}
	if err := cfg.SetKVs(c.Set); err != nil {
		return cfg, err
	}
	if c.Routing != "" {
		if err := cfg.SetKV("ROUTING=" + c.Routing); err != nil {
			return cfg, err
		}
	}
	if c.ECMPKey != "" {
		if err := cfg.SetKV("ECMP_KEY=" + c.ECMPKey); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(os.Stderr, "flowsim-packet: warning: %s\n", w)
	}
	return cfg, nil
}

func (c *command) run() error {
	if c.Keys {
		_, err := fmt.Print(confkey.Table(packet.Schema()))
		return err
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if err := cli.CheckTraceOut(c.Out); err != nil {
		return err
	}
	stop, err := cli.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	// Nearly all of the heap is the run's tables, live to the end; at the
	// default GOGC 100 the trace writer's garbage grew the heap to twice
	// them before a collection (2.05 GB against 0.98 GB live at 4.2 M
	// flows). They hold no pointers, so collecting more often is cheap;
	// below 64 MB not collecting is cheaper.
	cli.GCPercentAbove(20, 64<<20)
	wall := time.Now()
	idle := cpuidle.Check(c.Threads, 100*time.Millisecond)
	sr, rc, err := cli.OpenStream(c.Input, "pipe a stream in, e.g. topogen | simccl-decompose | flowsim-packet")
	if err != nil {
		return err
	}
	defer rc.Close()
	meter := c.Meter("flowsim-packet")
	defer meter.Stop()
	meter.Phase("reading " + sr.Name())
	limit, err := cli.MemoryBudget()
	if err != nil {
		return err
	}
	// Measured peak RSS: the 4.2 M flows of a 2048-GPU AllToAll take
	// 1.12 GB (273 bytes a flow; 323 before its timeouts moved to a FIFO
	// and ordered ids and start times stopped being stored twice, 490 at
	// GOGC 100); the 1.05 M of a 1024-GPU one, whose queue pairs all send at
	// once, 0.92 GB at GOGC 100. The estimate lies between, lowered by the
	// 50 bytes a flow those cuts saved.
	perFlow, also := int64(400), ""
	if parted := c.Threads > 1 || (c.Partitions != nil && *c.Partitions > 1); parted && limit > 0 {
		also = "run on one thread"
		// Parts keep shadows only of the open queue pairs whose packets
		// cross them, and a finished pair's go back: measured above the
		// single loop's peak on two parts, 83 MB for the 1024-GPU
		// AllReduce (all 132,096 pairs open at once), 0.09 GB for the
		// 2048-GPU AllToAll, 0.29 GB for the 4096-GPU one (16.8 M flows).
		// So they get a fixed reserve of a million pairs' shadows, not
		// one per flow, which asked 17.5 GB of the 4096-GPU AllToAll
		// that peaks at 3.9 GB and stopped it on a 24 GB machine.
		limit = max(limit-partitionedReserve*int64(cfg.QPsPerConn), 1)
	}
	set, err := flowset.ReadBudget(sr, flowset.Budget{Backend: "flowsim-packet", PerFlow: perFlow, Limit: limit, Expands: true, Also: also})
	meter.Hide() // for the warnings below
	if err != nil {
		return err
	}
	readSecs := time.Since(wall).Seconds()
	if err := set.RefuseEmpty("flowsim-packet"); err != nil {
		return err
	}
	switch {
	case c.Expand && set.CollNodes == 0:
		fmt.Fprintf(os.Stderr, "flowsim-packet: warning: --expand: %s has no COLL nodes (flow granularity); its flows run as they are\n", sr.Name())
	case !c.Expand:
		if err := set.RefuseColl("flowsim-packet"); err != nil {
			return err
		}
	}
	sendLat, err := cli.BackendSendLatency("flowsim-packet", int64(c.SendLat), set.Collectives)
	if err != nil {
		return err
	}
	if c.Threads < 1 {
		return cli.Usagef("--threads %d: at least 1", c.Threads)
	}
	parts := 0 // the single loop
	switch {
	case c.Partitions != nil:
		if parts = *c.Partitions; parts < 1 {
			return cli.Usagef("--partitions %d: at least 1", parts)
		}
		if c.Threads > parts {
			return cli.Usagef("--threads %d: more than the %d parts of --partitions", c.Threads, parts)
		}
	case c.Threads > 1:
		parts = c.Threads
	}
	opt := packet.Options{Config: cfg, Seed: c.Seed, SendLatPs: sendLat, Expand: c.Expand, MemoryLimit: limit,
		NoSymmetry: !c.Symmetry, Partitions: parts, Threads: c.Threads}
	if c.Surrogate != "" {
		sur, err := c.surrogate()
		if err != nil {
			return err
		}
		opt.Surrogate = &sur
	} else if c.Lite || c.Track > 0 || c.Window > 0 {
		return cli.Usagef("--surrogate-lite, --surrogate-track and --surrogate-window need --surrogate")
	}
	if c.LoopWindow != "" {
		start, end, err := parseWindow(c.LoopWindow)
		if err != nil {
			return cli.Usagef("--loop-window: %v", err)
		}
		opt.Loop = packet.NewLoopWindow(start, end)
	}
	opt.OnWarning = func(w string) {
		meter.Hide()
		fmt.Fprintf(os.Stderr, "flowsim-packet: warning: %s\n", w)
	}
	if c.ParReport != "" && parts < 2 {
		return cli.Usagef("--parallel-report needs --threads or --partitions above 1")
	}
	opt.MonitorDir = c.MonitorDir
	if parts > 1 {
		opt.Busy = func() bool {
			r := <-idle
			if !r.Busy(c.Threads) {
				return false
			}
			w := cpuidle.Warning(c.Threads, r.Idle, r.Cores)
			single := c.Partitions == nil
			if single {
				// The trace is the same for any parts: the single loop is the
				// faster one beside busy cores.
				w += "; running the single loop instead (the same trace; --partitions forces the parts)"
			}
			fmt.Fprintf(os.Stderr, "flowsim-packet: warning: %s\n", w)
			return single
		}
	}
	var parReport *os.File
	if c.ParReport != "" {
		if parReport, err = os.Create(c.ParReport); err != nil {
			return err
		}
		defer parReport.Close()
		opt.ParallelLog = parReport
	}
	var sim *packet.Sim
	var loop time.Time
	if meter != nil {
		// Called every 2^20 events of the single loop, whose count is
		// then exact; under --threads after windows that crossed a
		// multiple of 2^20, so that the calls give a lower bound.
		var calls uint64
		opt.Progress = func(done, total int, nowPs int64) {
			calls++
			events := max(sim.Stats().Events, calls<<20)
			meter.Set(int64(done), int64(total), progress.Flows(des.Time(nowPs), events, loop))
		}
	}
	sim, err = packet.NewRun(set, opt)
	if err != nil && parReport != nil {
		// A refused setup leaves no report behind (NewRun makes the
		// monitor files only once the run is set up).
		parReport.Close()
		os.Remove(c.ParReport)
	}
	var surErr *packet.SurrogateError
	if errors.As(err, &surErr) {
		return cli.Usagef("--surrogate: %v", surErr.Err)
	}
	if err != nil {
		return err
	}
	flows := sim.Flows()
	for _, w := range sim.Warnings {
		fmt.Fprintf(os.Stderr, "flowsim-packet: warning: %s\n", w)
	}
	loop = time.Now()
	runErr := sim.Run()
	loopSecs := time.Since(loop).Seconds()
	setupSecs := loop.Sub(wall).Seconds() - readSecs
	if c.MemProfile != "" {
		// Written at the end of the run, when the simulation's tables are largest.
		if err := writeHeapProfile(c.MemProfile); err != nil {
			return err
		}
	}
	meter.Stop()
	// Transfers a failed link cut off are in the trace with status failed,
	// the rest of the run complete; then the run exits 1 naming them.
	var failed *packet.FlowsFailed
	var incomplete *packet.Incomplete
	if runErr != nil && !errors.As(runErr, &failed) && !errors.As(runErr, &incomplete) {
		return runErr
	}
	written := time.Now()
	if err := c.writeTrace(set, flows, cfg, sim.SurrogateSwitches); err != nil {
		return err
	}
	traceSecs := time.Since(written).Seconds()
	if c.SimAIFCT != "" {
		if err := writeSimAIFCT(c.SimAIFCT, set, flows, sendLat); err != nil {
			return err
		}
	}
	st := sim.Stats()
	secs := time.Since(wall).Seconds()
	if c.Surrogate != "" {
		for _, sw := range sim.SurrogateSwitches {
			state := "closed"
			if sw.On {
				state = "opened"
			}
			fmt.Fprintf(os.Stderr, "flowsim-packet: surrogate %s at %s: %s\n", state, des.Time(sw.AtPs), sw.Why)
		}
		fmt.Fprintf(os.Stderr, "flowsim-packet: surrogate %s: %d packets delivered by the predictor, %d frozen as zombies\n", c.Surrogate, st.Bypassed, st.Zombies)
		l := sim.SurrogateLoad()
		if l.Saturated > 0 {
			fmt.Fprintf(os.Stderr, "flowsim-packet: surrogate: %d NIC ports the fabric saturated while tracking sent through it at the rate it delivered their data then (%.1f of %.1f Gb/s line rate in all); %d transfers their NICs reached only after it closed went through the fabric\n",
				l.Saturated, l.MeasuredBps/1e9, l.LineBps/1e9, l.Deferred)
		}
		if l.Backlog > 0 {
			fmt.Fprintf(os.Stderr, "flowsim-packet: surrogate: %d transfers waiting at NICs when it opened skipped their queue pairs\n", l.Backlog)
		}
	}
	if w := opt.Loop; w != nil {
		fmt.Fprintf(os.Stderr, "flowsim-packet: event loop from %s to %s: %.3f s, %d events, %.3f s CPU\n", des.Time(w.StartPs), des.Time(w.EndPs), w.Secs, w.Events, w.CPUSecs)
	}
	if worst, mean, n := sim.UplinkImbalance(); n > 0 {
		fmt.Fprintf(os.Stderr, "flowsim-packet: routing %s: uplink max/mean load per leaf %.3f mean, %.3f worst (%d leaves); %d data packets placed out of order\n",
			cfg.Routing, mean, worst, n, st.Reordered)
	}
	if st.Retransmitted > 0 || cfg.Transport != packet.TransportRoCE {
		// Go-back-N receivers also discard what arrives past a gap.
		what := "duplicates and out of order"
		if cfg.Transport.PlacesOutOfOrder() || cfg.Routing != packet.RouteECMP {
			what = "duplicates"
		}
		// Stale packets (their pair had finished or moved on) are
		// discarded too, and are not losses: the summary's "dropped" are.
		fmt.Fprintf(os.Stderr, "flowsim-packet: transport %s: %s retransmitted, %s discarded by receivers (%s; %d stale packets)\n",
			cfg.Transport, units.HumanSize(st.Retransmitted), units.HumanSize(st.Discarded), what, st.Stale)
	}
	switch { // the error is the one line said
	case incomplete != nil && incomplete.StopTime:
		// A horizon the user set (SimAI's stop time): the run ends there as
		// asked, and says what it left unfinished.
		fmt.Fprintf(os.Stderr, "flowsim-packet: note: stopped at SIMULATOR_STOP_TIME (%s): %d of %d flows finished; the trace holds those\n",
			des.Time(cfg.StopPs), incomplete.Done, incomplete.Flows)
	case incomplete != nil:
		return fmt.Errorf("%v; the trace holds the flows that finished", incomplete)
	case failed != nil:
		return fmt.Errorf("%v; the trace marks %d failed flows (status failed, %s never delivered)", failed, st.Failed, units.HumanSize(st.FailedBytes))
	}
	if ps := sim.ParallelStats(); ps != nil {
		for _, l := range strings.SplitAfter(strings.TrimSuffix(ps.Summary(), "\n"), "\n") {
			fmt.Fprintf(os.Stderr, "flowsim-packet: %s", l)
		}
		fmt.Fprintln(os.Stderr)
	}
	if parReport != nil {
		if err := parReport.Close(); err != nil {
			return err
		}
	}
	expanded := ""
	if made, peak, bytes, mirrored, mirroredBytes := flows.Expanded(); made > 0 {
		expanded = fmt.Sprintf(" (COLL nodes expanded into %d flows of %s, at most %d held at once)", made, units.HumanSize(bytes), peak)
		if mirrored > 0 {
			expanded = fmt.Sprintf(" (COLL nodes expanded into %d flows of %s, at most %d held at once; %d of them, %s, not run: their groups ran as the first group, alone on its server's NVLinks, did)",
				made, units.HumanSize(bytes), peak, mirrored, units.HumanSize(mirroredBytes))
		}
	}
	fmt.Fprintf(os.Stderr, "flowsim-packet: %s: %d flows%s, %s, simulated %s, %d events (%.2f M/s), %d data packets, %d dropped, %d PFC pauses, %d CNPs, wall %.2f s (reading %.2f s, setup %.2f s, event loop %.2f s, trace %.2f s)\n",
		sim.Algorithm().Name(), set.Flows(), expanded, units.HumanSize(set.TotalBytes()), des.Time(st.SimPs), st.Events,
		float64(st.Events)/secs/1e6, st.DataPackets, st.Dropped, st.Pauses, st.CNPs, secs, readSecs, setupSecs, loopSecs, traceSecs)
	return nil
}

func (c *command) surrogate() (packet.Surrogate, error) {
	if c.Surrogate == "auto" {
		if c.Track > 0 {
			return packet.Surrogate{}, cli.Usagef("--surrogate-track applies to a fixed window; auto tracks its steady windows")
		}
		w := int64(c.Window)
		if w == 0 {
			w = int64(100 * des.Microsecond)
		}
		return packet.Surrogate{AutoWindowPs: w, Lite: c.Lite}, nil
	}
	if c.Window > 0 {
		return packet.Surrogate{}, cli.Usagef("--surrogate-window applies to --surrogate auto")
	}
	start, end, err := parseWindow(c.Surrogate)
	if err != nil {
		return packet.Surrogate{}, cli.Usagef("--surrogate: %v (or auto)", err)
	}
	return packet.Surrogate{StartPs: start, EndPs: end, Lite: c.Lite, TrackPs: int64(c.Track)}, nil
}

// parseWindow reads START:END, two times with units.
func parseWindow(s string) (start, end int64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: expected START:END, e.g. 2ms:8ms", s)
	}
	if start, err = units.ParseDuration(a); err != nil {
		return 0, 0, fmt.Errorf("start: %v", err)
	}
	if end, err = units.ParseDuration(b); err != nil {
		return 0, 0, fmt.Errorf("end: %v", err)
	}
	if end <= start {
		return 0, 0, fmt.Errorf("%q: the end must come after the start", s)
	}
	return start, end, nil
}

func (c *command) writeTrace(set *flowset.Set, fl *packet.Flows, cfg packet.Config, switches []packet.SurrogateSwitch) error {
	params := cfg.Describe()
	params["seed"] = c.Seed
	params["expand"] = c.Expand
	if c.Surrogate != "" {
		params["surrogate"] = c.Surrogate
		params["surrogate_lite"] = c.Lite
	}
	if c.Surrogate == "auto" {
		// When the surrogate was open: "on 412us, off 2.01ms".
		var when []string
		for _, sw := range switches {
			state := "off "
			if sw.On {
				state = "on "
			}
			when = append(when, state+des.Time(sw.AtPs).String())
		}
		params["surrogate_switches"] = strings.Join(when, ", ")
	}
	// A run that stopped early (SIMULATOR_STOP_TIME, a deadlock) writes
	// the flows that finished.
	written := fl.Finished
	var rows int64
	for i := int32(0); i < int32(set.Flows()); i++ {
		if written(i) {
			rows++
		}
	}
	// The flows without a row make the trace partial in its metadata, so
	// that no reader takes what finished for the whole run.
	meta := trace.Meta{Backend: "packet", Params: params, Topology: set.TopologyMeta(), Rows: rows,
		Unfinished: int64(set.Flows()) - rows, Notes: set.Notes}
	if meta.Unfinished > 0 {
		// and says which collectives and jobs it cut, so that none of
		// them reads as whole.
		meta.Cut = set.Cut(written)
	}
	rs := set.Rows()
	return cli.WriteTrace(c.Out, meta, set.Flows(), func(i int32, r *trace.Row) bool {
		if !written(i) {
			// Not made: at SIMULATOR_STOP_TIME=1ps making the 87 k rows
			// nobody writes was 11% (30.5 of 270.8 M Ir) of micro's
			// instructions.
			return false
		}
		*r = rs.Row(i, fl.Result(i))
		return true
	})
}

// idealNs is flow i's ideal FCT as its trace row (and fct.txt) give it.
func idealNs(fl *packet.Flows, i int32) int64 {
	return des.BoundNs(des.Time(fl.Ideal[i]), des.Time(fl.StartPs(i)), des.Time(fl.End[i]))
}

// writeSimAIFCT writes SimAI's fct.txt: one line per transfer, addressed by
// node id as SimAI's IPs are. SimAI starts a transfer's clock after its
// send latency (sendLat ps).
func writeSimAIFCT(path string, set *flowset.Set, fl *packet.Flows, sendLat int64) (err error) {
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = f.Finish(err) }()
	bw := bufio.NewWriterSize(f, 1<<16)
	w := simaifct.NewWriter(bw)
	unfinished := int64(0)
	for i := int32(0); i < int32(set.Flows()); i++ {
		if set.Flow(i).Kind == flowset.Transfer && !fl.Finished(i) {
			unfinished++
		}
	}
	if unfinished > 0 {
		// The run stopped early: say so, as the trace's metadata does.
		if err := w.WritePartial(unfinished); err != nil {
			return err
		}
	}
	for i := int32(0); i < int32(set.Flows()); i++ {
		fr := set.Flow(i)
		if fr.Kind != flowset.Transfer || !fl.Finished(i) { // not a transfer, or unfinished
			continue
		}
		start := fl.StartPs(i) + sendLat
		l := simaifct.Line{SrcNode: fr.Src, DstNode: fr.Dst, Sport: fl.Sport[i], Dport: 100, SizeBytes: fr.Size,
			StartNs: des.Time(start).Ns(), FctNs: des.Time(fl.End[i]).Ns() - des.Time(start).Ns(), StandaloneFctNs: idealNs(fl, i)}
		if err := w.Write(&l); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// partitionedReserve is what --threads holds back from the memory budget
// for the parts' shadows of open queue pairs: a million pairs'.
const partitionedReserve = 1 << 20 * packet.PartitionedSlotBytes

func writeHeapProfile(path string) error {
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // the profile then shows what is live now, not as of the last cycle
	return f.Finish(pprof.WriteHeapProfile(f))
}
