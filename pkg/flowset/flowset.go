// Package flowset reads a decomposed stream into memory for a backend:
// the topology, groups, collectives and the flow DAG, with flows kept in
// compact records. Every simulator (analytical, packet, phy) loads its
// input through here, so they accept and reject the same streams.
package flowset

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Set is a stream read into memory: the topology, groups, collectives and
// the flow DAG. Flows are kept in compact records (56 bytes a flow,
// TestFlowRecordSize) because a run may hold millions of them.
type Set struct {
	Name        string
	Topology    *topo.Topology
	Groups      map[int64]*stream.Group
	Collectives map[int64]*stream.Collective
	// Jobs are the stream's job records in id order (formats/stream.md):
	// job i holds the ids from its firsts up to job i+1's.
	Jobs []stream.Job
	// Notes are the stream's note records, "producer: text", in order:
	// what its producers left out, which the trace carries on
	// (fabricsim.notes).
	Notes []string

	DAG *dag.DAG
	// CollNodes counts COLL flows: a collective-granularity stream, which
	// only a backend that models whole collectives runs (RefuseColl).
	CollNodes int
	flows     flowTable
	// recBreaks maps flow indexes to record indexes for error messages:
	// flow i is record recBreaks[k].rec + i - recBreaks[k].flow for the
	// last k with recBreaks[k].flow <= i (flows are usually contiguous).
	recBreaks []recBreak
}

type recBreak struct{ flow, rec int32 }

type collInfo struct {
	id                  int64
	cached, ok          bool
	op, algo, groupType string
	size                int64
	nranks              int32
	// training-iteration position and NCCL model, for the v2 trace columns
	layer, microbatch, stage int32
	layerName, phase, proto  string
	predictedNs              int64
	job                      string
}

// flowTable holds the flows in fixed-size blocks of records, indexed like
// the DAG: appending never copies (Go grows large slices by 1.25x, which
// copied each byte about four times at 2 M flows), and the fields a
// completion reads share a cache line.
type flowTable struct {
	blocks    [][]Flow
	n         int32
	connNames []string
}

const blockBits = 16

// Flow is one flow as the backends see it.
type Flow struct {
	ID      int64
	Coll    int64
	Size    int64    // bytes; delay_ps for a delay node
	Lat     des.Time // a transfer's step latency (delay_ps), path propagation included
	Src     int32
	Dst     int32
	Chunk   int32
	Channel int32
	Conn    uint16
	Kind    uint8
	// Port is the flow's connection's index among the connections its
	// source GPU opens to other servers, in stream order: a dual-homed NIC
	// puts it on port Port mod 2, round robin per queue pair as a bonded
	// mlx5 NIC does (route.Router.AppendPathPort).
	Port uint8
	// PaceNs is a transfer's pace_ps in ns, rounded up (formats/stream.md):
	// its connection's next transfer starts no sooner than PaceNs after
	// this one started sending (Pacer). 32 bits keep Flow at 56 bytes.
	PaceNs uint32
}

// MaxPacePs bounds a transfer's pace_ps: PaceNs holds it in 32 bits of ns
// (about 4.3 s).
const MaxPacePs = (1<<32 - 1) * 1000

// PaceNsOf rounds a pace_ps up to the ns Flow.PaceNs holds.
func PaceNsOf(ps int64) uint32 { return uint32((ps + 999) / 1000) }

// Flow kinds.
const (
	Transfer uint8 = iota
	Delay          // waits delay_ps
	Join           // a DELAY flow of size 0 without delay_ps: done when its deps are
	Coll           // a whole collective (COLL, collective granularity): Lat is its model time
)

func (ft *flowTable) get(i int32) *Flow {
	return &ft.blocks[i>>blockBits][i&(1<<blockBits-1)]
}

func (ft *flowTable) add() *Flow {
	if int(ft.n)>>blockBits == len(ft.blocks) {
		ft.blocks = append(ft.blocks, make([]Flow, 1<<blockBits))
	}
	ft.n++
	return ft.get(ft.n - 1)
}

// Flow returns flow i (DAG index). A backend reads it and keeps what a run
// changes (release times, progress) in its own state: several runs, of one
// backend or several, may use the same set one after another.
func (in *Set) Flow(i int32) *Flow { return in.flows.get(i) }

// ConnName is the connection type name of a flow.
func (in *Set) ConnName(f *Flow) string { return in.flows.connNames[f.Conn] }

// Collective returns the op, algorithm, size, group type and group size of
// a collective id, for the trace's collective columns; ok is false when
// the stream has no such record. (Rows caches these lookups for a run's
// rows.)
func (in *Set) Collective(id int64) (op, algo string, size int64, groupType string, nranks int32, ok bool) {
	var c collInfo
	in.coll(id, &c)
	return c.op, c.algo, c.size, c.groupType, c.nranks, c.ok
}

// coll fills c with the record of collective id. An id the stream has no
// record of (-1 for the delay nodes of raw flows) gets layer, microbatch
// and stage -1.
func (in *Set) coll(id int64, c *collInfo) {
	*c = collInfo{id: id, cached: true, layer: -1, microbatch: -1, stage: -1}
	if co, ok := in.Collectives[id]; ok {
		c.ok, c.op, c.algo, c.size = true, co.Op, co.Algorithm, co.Size
		c.layer, c.layerName, c.phase = co.Layer, co.LayerName, co.Phase
		c.microbatch, c.stage, c.proto = co.Microbatch, co.Stage, protoName(co.Protocol)
		c.predictedNs = psToNs(co.PredictedPs)
		if j := in.JobOf(co.ID, func(j *stream.Job) int64 { return j.FirstCollective }); j != nil {
			c.job = j.Name
		}
		if g, ok := in.Groups[co.Group]; ok {
			c.groupType, c.nranks = g.Type, int32(len(g.Ranks))
		}
	}
}

// JobOf is the job whose range of ids, by first (a job's first id of
// some kind), holds id; nil in a stream without job records.
func (in *Set) JobOf(id int64, first func(*stream.Job) int64) *stream.Job {
	if len(in.Jobs) == 0 || id < first(&in.Jobs[0]) {
		return nil
	}
	i, _ := slices.BinarySearchFunc(in.Jobs, id, func(j stream.Job, id int64) int { return cmp.Compare(first(&j), id+1) })
	return &in.Jobs[i-1]
}

// protoName spells an NCCL protocol as the trace does (LL, LL128,
// Simple); the stream writes them in lower case. Other values pass as
// they are.
func protoName(p string) string {
	for _, n := range [...]string{"LL", "LL128", "Simple"} {
		if strings.EqualFold(p, n) {
			return n
		}
	}
	return p
}

// psToNs rounds picoseconds to the nearest nanosecond, halves away from zero.
func psToNs(ps int64) int64 {
	if ps < 0 {
		return -((-ps + 500) / 1000)
	}
	return (ps + 500) / 1000
}

// TopologyMeta identifies the stream's fabric in a trace's metadata.
func (in *Set) TopologyMeta() trace.TopologyMeta {
	return trace.TopologyMeta{Family: in.Topology.Family, GPUs: in.Topology.GPUs, Hash: topo.Hash(in.Topology)}
}

// Flows is the number of flows (delay nodes included).
// Replayed is the set of collectives decomposed in SimAI replay (their
// send_lat_ps), nil when there are none: a transfer of theirs waits its
// step latency on top of its path's propagation, as SimAI sends a flow
// after its send latency and ns-3 then carries it; NCCL's step latencies
// elsewhere are end to end and include the propagation.
func (in *Set) Replayed() map[int64]bool {
	var m map[int64]bool
	for id, c := range in.Collectives {
		if c.SendLatPs > 0 {
			if m == nil {
				m = map[int64]bool{}
			}
			m[id] = true
		}
	}
	return m
}

func (in *Set) Flows() int { return in.DAG.Len() }

// TotalBytes is the sum of the flows' sizes.
func (in *Set) TotalBytes() int64 {
	var n int64
	for i := int32(0); i < in.flows.n; i++ {
		if f := in.flows.get(i); f.Kind == Transfer || f.Kind == Coll {
			n += f.Size
		}
	}
	return n
}

// record is the stream record index of flow i.
func (in *Set) record(i int32) int {
	k := sort.Search(len(in.recBreaks), func(k int) bool { return in.recBreaks[k].flow > i }) - 1
	if k < 0 {
		return -1
	}
	b := in.recBreaks[k]
	return int(b.rec + i - b.flow)
}

// FlowError locates an error at flow i's record.
func (in *Set) FlowError(i int32, field string, err error) error {
	return &stream.Error{Name: in.Name, Record: in.record(i), Kind: stream.KindFlow, Field: field, Err: err}
}

// Read reads a whole stream: exactly one topology before any flow, then
// groups, collectives and flows. Unknown kinds and paths records are skipped
// (this backend routes over the topology itself). It validates the topology,
// each flow's GPUs, and the DAG (missing deps, duplicate ids, cycles);
// errors name the record and field.
//
// Decoding runs on its own goroutine and hands flows over in batches, so
// msgpack decoding overlaps building the flow table and the DAG.
func Read(r *stream.Reader) (*Set, error) { return ReadBudget(r, Budget{}) }

// Budget bounds what ReadBudget may hold: Limit bytes (0: no bound) at
// about PerFlow bytes per flow for the whole run of Backend.
type Budget struct {
	Backend string
	PerFlow int64
	Limit   int64
	Expands bool   // the backend has --expand (else the hint names those that do)
	Also    string // one more way out, for the hint (a flag that costs memory)
}

func (b Budget) expandHint() string {
	if b.Expands {
		return b.Backend + " --expand"
	}
	return "flowsim-packet or flowsim-analytical with --expand"
}

// ReadBudget is Read that stops, with an estimate, once the flows read so
// far would need more than the budget: a stream too large for the machine
// fails early with a hint instead of running it out of memory.
func ReadBudget(r *stream.Reader, budget Budget) (*Set, error) {
	in := &Set{Name: r.Name(), Groups: map[int64]*stream.Group{}, Collectives: map[int64]*stream.Collective{}}
	full := make(chan *flowBatch, 4)
	free := make(chan *flowBatch, 4)
	quit := make(chan struct{})
	errc := make(chan error, 1)
	for i := 0; i < cap(free); i++ {
		free <- &flowBatch{}
	}
	go func() {
		defer close(full)
		errc <- decode(r, in, full, free, quit)
	}()
	ft := &in.flows
	connIDs := map[string]uint16{}
	var lastConn uint16
	var lastName string
	b := dag.NewBuilder(1 << 16)
	var err error
	for batch := range full {
		for k := 0; k < len(batch.flows) && err == nil; k++ {
			f := &batch.flows[k]
			idx := int32(b.Len())
			if n := len(in.recBreaks); n == 0 || in.recBreaks[n-1].rec+idx-in.recBreaks[n-1].flow != f.rec {
				in.recBreaks = append(in.recBreaks, recBreak{flow: idx, rec: f.rec})
			}
			if e := b.Add(f.id, batch.deps[f.deps:f.deps+f.nDeps]); e != nil {
				err = in.FlowError(idx, "", e)
				break
			}
			ci, ok := lastConn, f.conn == lastName && lastName != ""
			if !ok {
				ci, ok = connIDs[f.conn]
			}
			if !ok {
				if len(ft.connNames) == math.MaxUint16 {
					err = in.FlowError(idx, "conn_type", fmt.Errorf("more than %d distinct connection types", math.MaxUint16))
					break
				}
				ci = uint16(len(ft.connNames))
				connIDs[f.conn] = ci
				ft.connNames = append(ft.connNames, f.conn)
			}
			lastConn, lastName = ci, f.conn
			if budget.Limit > 0 && idx%batchFlows == 0 && int64(idx)*budget.PerFlow > budget.Limit {
				also := ""
				if budget.Also != "" {
					also = ", or " + budget.Also
				}
				err = in.FlowError(idx, "", fmt.Errorf("after %d flows %s needs about %s (%d B per flow), beyond the %s this machine has (FABRICSIM_MEMORY sets it): decompose with --granularity collective and run %s (flows made as each collective starts), or simulate fewer GPUs%s",
					idx, budget.Backend, units.HumanSize(int64(idx)*budget.PerFlow), budget.PerFlow, units.HumanSize(budget.Limit), budget.expandHint(), also))
				break
			}
			*ft.add() = Flow{ID: f.id, Coll: f.coll, Size: f.size, Lat: des.Time(f.lat), Src: f.src, Dst: f.dst, Chunk: f.chunk, Channel: f.channel, Conn: ci, Kind: f.kind, PaceNs: f.pace}
			if f.kind == Coll {
				in.CollNodes++
			}
		}
		if err != nil {
			close(quit)
			for range full { // let the decoder finish its send and stop
			}
			<-errc
			return nil, err
		}
		free <- batch
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	if in.Topology == nil {
		return nil, fmt.Errorf("%s: no topology record in the stream (pipe topogen's output in)", in.Name)
	}
	if err := in.checkGroups(); err != nil {
		return nil, err
	}
	// The ports are numbered from the flows alone, on a goroutine beside
	// the DAG's build: both are serial work between reading and the run
	// (0.3 s of CPU each on a 2048-GPU AllToAll's 4.2 M flows, pprof).
	var ports sync.WaitGroup
	ports.Go(in.assignPorts)
	d, err := b.Build()
	ports.Wait()
	if err != nil {
		var de *dag.Error
		if errors.As(err, &de) {
			return nil, in.FlowError(de.Index, de.Field, errors.New(de.Error()))
		}
		return nil, err
	}
	in.DAG = d
	if err := in.checkCollRecords(); err != nil {
		return nil, err
	}
	return in, nil
}

// checkCollRecords refuses a COLL flow whose collective has no record: its
// op, algorithm and group are what a backend prices the fabric with and
// the reports name it by. (A transfer may name a collective without a
// record: it is then reported without op or algorithm.)
func (in *Set) checkCollRecords() error {
	if in.CollNodes == 0 {
		return nil
	}
	for i := int32(0); int(i) < in.Flows(); i++ {
		if f := in.Flow(i); f.Kind == Coll && in.Collectives[f.Coll] == nil {
			return in.FlowError(i, "collective", fmt.Errorf("COLL flow of collective %d, which has no collective record", f.Coll))
		}
	}
	return nil
}

// checkGroups refuses a group with a rank that is no GPU of the topology,
// or twice in it (a backend would route to a switch or nowhere), or whose
// siblings are not groups of its type and size (a backend pricing the
// fabric would load it with ranks that do not run the collective).
func (in *Set) checkGroups() error {
	ids := make([]int64, 0, len(in.Groups))
	for id := range in.Groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	seen := map[int32]bool{}
	for _, gid := range ids {
		g := in.Groups[gid]
		clear(seen)
		for k, r := range g.Ranks {
			switch {
			case r < 0 || int(r) >= in.Topology.GPUs:
				return fmt.Errorf("%s: group %d: ranks[%d]: %d is not a GPU of the topology (GPUs are 0..%d)", in.Name, g.ID, k, r, in.Topology.GPUs-1)
			case seen[r]:
				return fmt.Errorf("%s: group %d: ranks[%d]: rank %d is in the group twice", in.Name, g.ID, k, r)
			}
			seen[r] = true
		}
		for k, id := range g.Siblings {
			s, ok := in.Groups[id]
			switch {
			case !ok:
				return fmt.Errorf("%s: group %d: siblings[%d]: no group %d in the stream", in.Name, g.ID, k, id)
			case s.Type != g.Type || len(s.Ranks) != len(g.Ranks):
				return fmt.Errorf("%s: group %d: siblings[%d]: group %d is %s of %d ranks, not %s of %d", in.Name, g.ID, k, id, s.Type, len(s.Ranks), g.Type, len(g.Ranks))
			}
		}
	}
	return nil
}

// assignPorts numbers each source GPU's cross-server connections, a
// connection being one (collective, source, destination, channel): the
// flows of a connection share a queue pair and so a NIC port.
//
// Numbering depends only on a source's own flows in stream order, so the
// flows are bucketed by source (a counting sort, which keeps stream order)
// and each source is numbered with one small map, cleared in between: a
// map over every connection at once held 16.8 M keys for a 4096-rank
// AllToAll (gigabytes, rehashed as it doubled).
func (in *Set) assignPorts() {
	type conn struct {
		coll    int64
		dst, ch int32
	}
	t := in.Topology
	cross := func(f *Flow) bool {
		return f.Kind == Transfer && f.Src >= 0 && f.Src < int32(t.GPUs) && f.Dst >= 0 && f.Dst < int32(t.GPUs) &&
			t.Nodes[f.Src].Server != t.Nodes[f.Dst].Server
	}
	start := make([]int32, t.GPUs+1)
	for i := int32(0); i < in.flows.n; i++ {
		if f := in.flows.get(i); cross(f) {
			start[f.Src+1]++
		}
	}
	for g := 0; g < t.GPUs; g++ {
		start[g+1] += start[g]
	}
	idx := make([]int32, start[t.GPUs])
	fill := append([]int32(nil), start[:t.GPUs]...)
	for i := int32(0); i < in.flows.n; i++ {
		if f := in.flows.get(i); cross(f) {
			idx[fill[f.Src]] = i
			fill[f.Src]++
		}
	}
	number := func(from, to int) {
		ports := map[conn]uint8{}
		for g := from; g < to; g++ {
			clear(ports)
			var next uint8
			for _, i := range idx[start[g]:start[g+1]] {
				f := in.flows.get(i)
				k := conn{f.Coll, f.Dst, f.Channel}
				p, ok := ports[k]
				if !ok {
					p = next
					next++ // wraps at 256: only p mod the port count matters
					ports[k] = p
				}
				f.Port = p
			}
		}
	}
	// Sources are numbered apart, so a large set's are split between
	// the cores: serial work before the run (0.42 s of CPU on a 2048-GPU
	// AllToAll's 4.2 M flows, pprof).
	parts := 1
	if len(idx) >= parallelPortFlows {
		parts = min(runtime.GOMAXPROCS(0), t.GPUs, 8)
	}
	var wg sync.WaitGroup
	for k := 1; k < parts; k++ {
		wg.Go(func() { number(t.GPUs*k/parts, t.GPUs*(k+1)/parts) })
	}
	number(0, t.GPUs/parts)
	wg.Wait()
}

// parallelPortFlows is the cross-server flows from which assignPorts
// splits the sources between cores (below, a goroutine costs more than
// it saves).
var parallelPortFlows = 1 << 16 // a variable for its test

// flowBatch carries decoded flows from the decoder to Read.
type flowBatch struct {
	flows []rawFlow
	deps  []int64
}

type rawFlow struct {
	id, coll, size   int64 // size is delay_ps for a delay node
	lat              int64 // a transfer's delay_ps
	src, dst         int32
	chunk, channel   int32
	rec, deps, nDeps int32 // record index; deps are batch.deps[deps:deps+nDeps]
	conn             string
	kind             uint8
	pace             uint32 // PaceNs
}

const batchFlows = 4096

// batchDeps also ends a batch: a 2048-GPU AllToAll's 2048 joins of 4094
// deps each came in one batch, whose deps grew by doubling to 64 MB
// (growslice, 14% of the decoder's CPU).
const batchDeps = 1 << 16

// decode reads every record, keeps the topology, groups and collectives in
// in, checks each flow and sends flows in batches. The topology is set
// before the first batch is sent, so Read may use it.
func decode(r *stream.Reader, in *Set, full chan<- *flowBatch, free <-chan *flowBatch, quit <-chan struct{}) error {
	var f stream.Flow
	batch := <-free
	batch.flows, batch.deps = batch.flows[:0], batch.deps[:0]
	send := func() bool {
		select {
		case full <- batch:
		case <-quit:
			return false
		}
		select {
		case batch = <-free:
		case <-quit:
			return false
		}
		batch.flows, batch.deps = batch.flows[:0], batch.deps[:0]
		return true
	}
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
			t, err := r.Topology()
			if err != nil {
				return err
			}
			if err := topo.Validate(t); err != nil {
				return r.Errorf("", "%v", err)
			}
			in.Topology = t
		case stream.KindJob:
			j, err := r.Job()
			if err != nil {
				return err
			}
			if n := len(in.Jobs); n > 0 {
				p := &in.Jobs[n-1]
				switch {
				case j.FirstGroup < p.FirstGroup:
					return r.Errorf("first_group", "%d is below job %q's %d: job records come in id order", j.FirstGroup, p.Name, p.FirstGroup)
				case j.FirstCollective < p.FirstCollective:
					return r.Errorf("first_collective", "%d is below job %q's %d: job records come in id order", j.FirstCollective, p.Name, p.FirstCollective)
				case j.FirstFlow < p.FirstFlow:
					return r.Errorf("first_flow", "%d is below job %q's %d: job records come in id order", j.FirstFlow, p.Name, p.FirstFlow)
				}
				for _, q := range in.Jobs {
					if q.Name == j.Name {
						return r.Errorf("name", "a second job %q", j.Name)
					}
				}
			}
			in.Jobs = append(in.Jobs, *j)
		case stream.KindNote:
			n, err := r.Note()
			if err != nil {
				return err
			}
			if len(in.Notes) == stream.MaxNotes {
				return r.Errorf("", "more than %d note records", stream.MaxNotes)
			}
			t := n.Text
			if n.Producer != "" {
				t = n.Producer + ": " + t
			}
			in.Notes = append(in.Notes, t)
		case stream.KindGroup:
			g, err := r.Group()
			if err != nil {
				return err
			}
			if _, dup := in.Groups[g.ID]; dup {
				return r.Errorf("id", "duplicate group id %d", g.ID)
			}
			in.Groups[g.ID] = g
		case stream.KindCollective:
			c, err := r.Collective()
			if err != nil {
				return err
			}
			if _, dup := in.Collectives[c.ID]; dup {
				return r.Errorf("id", "duplicate collective id %d", c.ID)
			}
			in.Collectives[c.ID] = c
		case stream.KindFlow:
			if err := r.Flow(&f); err != nil {
				return err
			}
			if in.Topology == nil {
				return r.Errorf("", "flow before the topology record (pipe topogen's output in first)")
			}
			kind, err := checkFlow(r, &f, in.Topology)
			if err != nil {
				return err
			}
			size, lat := f.Size, f.DelayPs
			if kind == Delay {
				size, lat = f.DelayPs, 0
			}
			batch.flows = append(batch.flows, rawFlow{id: f.ID, coll: f.Collective, size: size, lat: lat, kind: kind, src: f.Src, dst: f.Dst,
				chunk: f.Chunk, channel: f.Channel, rec: int32(r.Index()), deps: int32(len(batch.deps)), nDeps: int32(len(f.Deps)), conn: f.ConnType,
				pace: PaceNsOf(f.PacePs)})
			batch.deps = append(batch.deps, f.Deps...)
			if (len(batch.flows) == batchFlows || len(batch.deps) >= batchDeps) && !send() {
				return nil
			}
		}
	}
	if len(batch.flows) > 0 {
		send()
	}
	return nil
}

// Bounds on a flow: 1 TiB (as a collective, pkg/collective) and 2^56 ps,
// so that byte sums over a run and simulated times stay far inside int64
// (a 2^63-1 byte flow was reported as "-8EiB moved").
const (
	MaxFlowBytes = 1 << 40
	MaxDelayPs   = 1 << 56
)

// connTypes are the stream's connection types (formats/stream.md); the
// trace and its statistics group flows by them, so an unknown one is a
// writer's error, not a new kind.
var connTypes = []string{stream.ConnRing, stream.ConnTree, stream.ConnNVLS, stream.ConnPXNInit, stream.ConnNet,
	stream.ConnPXNFinal, stream.ConnA2A, stream.ConnP2P, stream.ConnMSCCL, stream.ConnDelay, stream.ConnColl}

// checkFlow classifies a flow and validates what the DAG does not: delay
// nodes have size 0 as the stream contract says, and a transfer's ends are
// GPUs or NVSwitches (NVLS flows run between a GPU and its NVSwitch).
// Delay nodes and joins name the rank that waits and are not routed, so any
// value passes there. A transfer's delay_ps is its step latency.
func checkFlow(r *stream.Reader, f *stream.Flow, t *topo.Topology) (uint8, error) {
	switch {
	case f.Size > MaxFlowBytes:
		return 0, r.Errorf("size", "flow %d: %d bytes, above the %d (1 TiB) whose sums and times every backend keeps in 64-bit counters", f.ID, f.Size, int64(MaxFlowBytes))
	case f.DelayPs > MaxDelayPs:
		return 0, r.Errorf("delay_ps", "flow %d: %d ps, above the %d (about 20 hours) a delay may take", f.ID, f.DelayPs, int64(MaxDelayPs))
	case f.PacePs > MaxPacePs || f.PacePs > 0 && (f.Size == 0 || f.ConnType == stream.ConnDelay || f.ConnType == stream.ConnColl):
		return 0, r.Errorf("pace_ps", "flow %d: %d ps: a pace is for a transfer, at most %d ps", f.ID, f.PacePs, int64(MaxPacePs))
	case !slices.Contains(connTypes, f.ConnType):
		return 0, r.Errorf("conn_type", "flow %d: %q is not a connection type (%s)", f.ID, f.ConnType, strings.Join(connTypes, ", "))
	case f.Channel < -1:
		return 0, r.Errorf("channel", "flow %d: channel %d (channels count from 0; -1 is none)", f.ID, f.Channel)
	case f.ConnType == stream.ConnColl:
		if f.Src != f.Dst || f.Src < 0 || int(f.Src) >= t.GPUs {
			return 0, r.Errorf("src", "flow %d: a COLL node sits on one GPU (src = dst, 0..%d), not %d -> %d", f.ID, t.GPUs-1, f.Src, f.Dst)
		}
		return Coll, nil
	case f.ConnType == stream.ConnDelay && f.Size != 0:
		return 0, r.Errorf("size", "flow %d: a DELAY node has size 0, this one has size %d", f.ID, f.Size)
	case f.DelayPs > 0 && f.Size == 0:
		return Delay, nil
	case f.Size == 0 && f.ConnType == stream.ConnDelay:
		return Join, nil
	}
	for _, e := range [2]struct {
		field string
		v     int32
	}{{"src", f.Src}, {"dst", f.Dst}} {
		if e.v < 0 || int(e.v) >= len(t.Nodes) || (int(e.v) >= t.GPUs && t.Nodes[e.v].Kind != stream.NodeNVSwitch) {
			return 0, r.Errorf(e.field, "flow %d: %d is not a GPU (0..%d) or an NVSwitch of the topology", f.ID, e.v, t.GPUs-1)
		}
	}
	if f.Src == f.Dst {
		// No collective sends to itself (a local copy is not a flow), and
		// the backends would disagree on what it costs.
		return 0, r.Errorf("dst", "flow %d: a %s transfer from %d to itself; a rank's local work is a DELAY node", f.ID, f.ConnType, f.Src)
	}
	return Transfer, nil
}

// RefuseColl is the error a backend that moves every flow gives a
// collective-granularity stream, nil for a flow-granularity one.
func (in *Set) RefuseColl(backend string) error {
	if in.CollNodes == 0 {
		return nil
	}
	return fmt.Errorf("%s: a collective-granularity stream (%d COLL nodes, simccl-decompose --granularity collective): %s needs flows; decompose with --granularity flow, or run flowsim-packet or flowsim-analytical with --expand (the same flows, made as each collective starts)", in.Name, in.CollNodes, backend)
}

// RefuseEmpty refuses a stream without a single flow, such as topogen's
// output alone: a run of nothing once printed "0 flows ... simulated 0ps"
// and exited 0, a result that looks whole.
func (in *Set) RefuseEmpty(backend string) error {
	if in.Flows() > 0 {
		return nil
	}
	return fmt.Errorf("%s: no flows, only a topology: %s has nothing to simulate; pipe the topology through simccl-decompose first, e.g. topogen --gpus 16 | simccl-decompose --workload examples/workloads/micro_allreduce.txt | %s", in.Name, backend, backend)
}

// JobName is the name of the job flow f belongs to, as the trace's job
// column says it: its collective's job, or for a flow of no collective the
// job whose range of flow ids holds it; "" in a stream without jobs.
func (in *Set) JobName(f *Flow) string {
	var c collInfo
	in.coll(f.Coll, &c)
	return in.jobName(f, &c)
}

func (in *Set) jobName(f *Flow, c *collInfo) string {
	if !c.ok && len(in.Jobs) > 0 {
		if j := in.JobOf(f.ID, func(j *stream.Job) int64 { return j.FirstFlow }); j != nil {
			return j.Name
		}
	}
	return c.job
}
