package chakrarun

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// CollectiveStream is a collective-granularity stream's records
// (simccl-decompose --granularity collective): its groups, collectives
// and flows, as read.
type CollectiveStream struct {
	Name   string // the stream's name, for errors
	GPUs   int    // the topology's
	Groups []stream.Group
	Colls  []stream.Collective
	Flows  []stream.Flow
}

type sKind int

const (
	sComp    sKind = iota // a delay flow: COMP on its stage's ranks
	sColl                 // a COLL node (or a no-op collective's join)
	sPair                 // a pipeline transfer: send and receive
	sBarrier              // a join of every rank (collective -1, no delay)
)

// sUnit is one node of the representatives' program.
type sUnit struct {
	kind      sKind
	rep       int32 // sComp, sColl: the representative; sPair: the sender
	peer      int32 // sPair: the receiving representative
	coll      int   // index into Colls (-1: none)
	delayPs   int64
	deps      []int   // units this one waits for (on rep; a barrier: any)
	flowFirst int64   // for errors
	barDeps   [][]int // sBarrier: per stage, its units waited for
}

// WriteCollectiveStream writes a collective-granularity stream as one
// Chakra trace per rank (PREFIX.<rank>.et) and the group file. Each
// stage's representative's program (its compute delays, COLL nodes and
// pipeline transfers) is every rank of the stage's program, as the stream
// means it: a COLL node runs on its group and on each sibling group, each
// rank taking the one it is in; a transfer between two representatives is
// a send/receive pair in every PP group, between the ranks of the same
// two stages. Joins of no collective are barriers of every rank. It
// returns the files written.
func WriteCollectiveStream(s *CollectiveStream, prefix string) ([]string, error) {
	errf := func(flow int64, field, format string, args ...any) error {
		return fmt.Errorf("%s: flow %d, field %s: %s", s.Name, flow, field, fmt.Sprintf(format, args...))
	}
	collAt := make(map[int64]int, len(s.Colls))
	for i := range s.Colls {
		collAt[s.Colls[i].ID] = i
	}
	groupAt := make(map[int64]int, len(s.Groups))
	for i := range s.Groups {
		groupAt[s.Groups[i].ID] = i
	}
	var units []sUnit
	unitOf := make(map[int64]int, len(s.Flows)) // flow id -> unit, -1 a join passed through
	joinDeps := map[int64][]int{}
	byColl := map[int]int{} // collective index -> unit (collectives and pairs)
	resolve := func(deps []int64, f int64) ([]int, error) {
		var out []int
		for _, d := range deps {
			u, ok := unitOf[d]
			if !ok {
				return nil, errf(f, "deps", "flow %d is not an earlier flow of the stream", d)
			}
			if u >= 0 {
				if !slices.Contains(out, u) {
					out = append(out, u)
				}
				continue
			}
			for _, v := range joinDeps[d] {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		return out, nil
	}
	for i := range s.Flows {
		f := &s.Flows[i]
		deps, err := resolve(f.Deps, f.ID)
		if err != nil {
			return nil, err
		}
		if f.Collective < 0 {
			switch {
			case f.Size == 0 && f.DelayPs > 0: // a straggler's late start, a job's start
				unitOf[f.ID] = len(units)
				units = append(units, sUnit{kind: sComp, rep: f.Src, coll: -1, delayPs: f.DelayPs, deps: deps, flowFirst: f.ID})
			case f.Size == 0: // a barrier of every rank
				unitOf[f.ID] = len(units)
				units = append(units, sUnit{kind: sBarrier, coll: -1, deps: deps, flowFirst: f.ID})
			default:
				return nil, errf(f.ID, "collective", "a transfer of no collective has no Chakra node")
			}
			continue
		}
		ci, ok := collAt[f.Collective]
		if !ok {
			return nil, errf(f.ID, "collective", "collective %d has no record in the stream", f.Collective)
		}
		c := &s.Colls[ci]
		switch nccl.Op(c.Op) {
		case stream.OpCompute:
			if f.Size != 0 {
				return nil, errf(f.ID, "size", "%d bytes in a compute phase", f.Size)
			}
			unitOf[f.ID] = len(units)
			units = append(units, sUnit{kind: sComp, rep: f.Src, coll: ci, delayPs: f.DelayPs, deps: deps, flowFirst: f.ID})
			continue
		case nccl.SendRecv:
			u, ok := byColl[ci]
			if !ok {
				u = len(units)
				byColl[ci] = u
				units = append(units, sUnit{kind: sPair, rep: f.Src, peer: -1, coll: ci, flowFirst: f.ID})
			}
			un := &units[u]
			if f.Size > 0 {
				switch {
				case f.Src != un.rep:
					return nil, errf(f.ID, "src", "GPU %d, where transfer %d's sender is GPU %d", f.Src, c.ID, un.rep)
				case un.peer >= 0 && f.Dst != un.peer:
					return nil, errf(f.ID, "dst", "GPU %d, where transfer %d's receiver is GPU %d", f.Dst, c.ID, un.peer)
				}
				un.peer = f.Dst
			} else if f.Src != un.rep { // a transfer of nothing: the receiver's own join
				if un.peer >= 0 && f.Src != un.peer {
					return nil, errf(f.ID, "src", "GPU %d, where transfer %d's receiver is GPU %d", f.Src, c.ID, un.peer)
				}
				un.peer = f.Src
			}
			unitOf[f.ID] = u
			for _, d := range deps {
				if d != u && !slices.Contains(un.deps, d) {
					un.deps = append(un.deps, d)
				}
			}
			continue
		}
		if f.ConnType != stream.ConnColl && f.ConnType != stream.ConnDelay {
			return nil, errf(f.ID, "conn_type", "%s of collective %d (%s): a flow-granularity stream; Chakra is written from a collective-granularity one (--granularity collective) or from the workload (--workload, --op)", f.ConnType, c.ID, c.Op)
		}
		if _, ok := commType[nccl.Op(c.Op)]; !ok {
			return nil, errf(f.ID, "collective", "collective %d: %s has no Chakra collective type", c.ID, c.Op)
		}
		if u, ok := byColl[ci]; ok {
			return nil, errf(f.ID, "collective", "collective %d has a second node (flow %d): a flow-granularity stream?", c.ID, units[u].flowFirst)
		}
		byColl[ci] = len(units)
		unitOf[f.ID] = len(units)
		units = append(units, sUnit{kind: sColl, rep: f.Src, coll: ci, deps: deps, flowFirst: f.ID})
	}
	for u := range units {
		if units[u].kind == sPair && units[u].peer < 0 {
			return nil, errf(units[u].flowFirst, "collective", "pipeline transfer %d moves no bytes", s.Colls[units[u].coll].ID)
		}
	}

	// Stages: the PP group the transfers name and its siblings; without
	// transfers one stage of every GPU.
	var pp []int // group indexes: the transfers' group, then its siblings
	for _, un := range units {
		if un.kind != sPair {
			continue
		}
		gi, ok := groupAt[s.Colls[un.coll].Group]
		if !ok {
			return nil, errf(un.flowFirst, "collective", "transfer %d's group %d has no record", s.Colls[un.coll].ID, s.Colls[un.coll].Group)
		}
		if pp == nil {
			pp = []int{gi}
			for _, sib := range s.Groups[gi].Siblings {
				si, ok := groupAt[sib]
				if !ok {
					return nil, fmt.Errorf("%s: group %d, field siblings: group %d has no record", s.Name, s.Groups[gi].ID, sib)
				}
				pp = append(pp, si)
			}
		} else if gi != pp[0] {
			return nil, errf(un.flowFirst, "collective", "transfer %d is on group %d, the others on group %d: not one pipeline of representatives", s.Colls[un.coll].ID, s.Groups[gi].ID, s.Groups[pp[0]].ID)
		}
	}
	var reps []int32     // by stage
	var stages [][]int32 // by stage: its ranks
	world := 0
	if pp == nil {
		reps = []int32{0}
		all := make([]int32, s.GPUs)
		for i := range all {
			all[i] = int32(i)
		}
		stages = [][]int32{all}
		world = s.GPUs
	} else {
		reps = s.Groups[pp[0]].Ranks
		stages = make([][]int32, len(reps))
		seen := map[int32]bool{}
		for _, gi := range pp {
			g := &s.Groups[gi]
			if len(g.Ranks) != len(reps) {
				return nil, fmt.Errorf("%s: group %d, field ranks: %d ranks, the pipeline has %d stages", s.Name, g.ID, len(g.Ranks), len(reps))
			}
			for st, r := range g.Ranks {
				stages[st] = append(stages[st], r)
				seen[r] = true
			}
		}
		world = len(seen)
		for r := range seen {
			if int(r) >= world {
				return nil, fmt.Errorf("%s: group %d, field ranks: GPU %d, where the pipeline's %d ranks are not GPUs 0 to %d (a stream decomposed with --place? write Chakra from the workload)", s.Name, s.Groups[pp[0]].ID, r, world, world-1)
			}
		}
	}
	stageOf := map[int32]int{}
	for st, r := range reps {
		stageOf[r] = st
	}
	for _, un := range units {
		if un.kind == sBarrier {
			continue
		}
		if _, ok := stageOf[un.rep]; !ok {
			return nil, errf(un.flowFirst, "src", "GPU %d is no stage's representative (%v): a flow-granularity stream, or several jobs?", un.rep, reps)
		}
		if un.kind == sPair {
			if _, ok := stageOf[un.peer]; !ok {
				return nil, errf(un.flowFirst, "dst", "GPU %d is no stage's representative (%v)", un.peer, reps)
			}
		}
	}
	// Each unit's dependencies by the rank (representative) they are on.
	side := func(v int, rep int32) bool {
		switch un := &units[v]; un.kind {
		case sBarrier:
			return true
		case sPair:
			return un.rep == rep || un.peer == rep
		default:
			return un.rep == rep
		}
	}
	for u := range units {
		un := &units[u]
		if un.kind == sBarrier {
			un.barDeps = make([][]int, len(reps))
			for _, v := range un.deps {
				for st, r := range reps {
					if side(v, r) {
						un.barDeps[st] = append(un.barDeps[st], v)
					}
				}
			}
			continue
		}
		for _, v := range un.deps {
			if !side(v, un.rep) {
				return nil, errf(un.flowFirst, "deps", "waits for GPU %d's work without a transfer from it", units[v].rep)
			}
		}
	}

	// Groups: every group record, named 1, 2, ... in stream order.
	names := make([]string, len(s.Groups))
	ranks := make([][]int32, len(s.Groups))
	for i := range s.Groups {
		names[i] = strconv.Itoa(i + 1)
		ranks[i] = s.Groups[i].Ranks
		for _, r := range ranks[i] {
			if int(r) >= world {
				return nil, fmt.Errorf("%s: group %d, field ranks: GPU %d, where the job's %d ranks are GPUs 0 to %d (a stream decomposed with --place? write Chakra from the workload)", s.Name, s.Groups[i].ID, r, world, world-1)
			}
		}
	}
	// For a COLL on group G: the group (of G and its siblings) each rank
	// of the stage is in.
	member := func(un *sUnit) (map[int32]int, error) {
		c := &s.Colls[un.coll]
		gi, ok := groupAt[c.Group]
		if !ok {
			return nil, errf(un.flowFirst, "collective", "collective %d's group %d has no record", c.ID, c.Group)
		}
		gs := []int{gi}
		for _, sib := range s.Groups[gi].Siblings {
			si, ok := groupAt[sib]
			if !ok {
				return nil, fmt.Errorf("%s: group %d, field siblings: group %d has no record", s.Name, s.Groups[gi].ID, sib)
			}
			gs = append(gs, si)
		}
		in := map[int32]int{}
		for _, g := range gs {
			for _, r := range s.Groups[g].Ranks {
				if _, dup := in[r]; dup {
					return nil, errf(un.flowFirst, "collective", "collective %d: GPU %d is in two of group %d's siblings", c.ID, r, c.Group)
				}
				in[r] = g
			}
		}
		for _, r := range stages[stageOf[un.rep]] {
			if _, ok := in[r]; !ok {
				return nil, errf(un.flowFirst, "collective", "collective %d: GPU %d of the stage is in no sibling of group %d (a stream decomposed with --place? write Chakra from the workload)", c.ID, r, c.Group)
			}
		}
		return in, nil
	}
	nodes := make([][]*etpb.Node, world)
	ids := func(l []int) []uint64 {
		out := make([]uint64, len(l))
		for i, v := range l {
			out[i] = uint64(v)
		}
		return out
	}
	label := func(un *sUnit, def string) string {
		if un.coll >= 0 && s.Colls[un.coll].Label != "" {
			return s.Colls[un.coll].Label
		}
		return def
	}
	for u := range units {
		un := &units[u]
		id := uint64(u)
		switch un.kind {
		case sComp:
			for _, r := range stages[stageOf[un.rep]] {
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: label(un, "delay"), Type: etpb.NodeType_COMP_NODE, CtrlDeps: ids(un.deps),
					DurationMicros: uint64(math.Round(float64(un.delayPs) / 1e6)),
					Attr:           []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("fabricsim.duration_ps", un.delayPs)}})
			}
		case sBarrier:
			for st, rs := range stages {
				for _, r := range rs {
					nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: "barrier", Type: etpb.NodeType_COMM_COLL_NODE, CtrlDeps: ids(un.barDeps[st]),
						Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_type", int64(etpb.CollectiveCommType_BARRIER)), chakra.Int("comm_size", 0)}})
				}
			}
		case sColl:
			in, err := member(un)
			if err != nil {
				return nil, err
			}
			c := &s.Colls[un.coll]
			for _, r := range stages[stageOf[un.rep]] {
				g := in[r]
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: label(un, string(c.Op)), Type: etpb.NodeType_COMM_COLL_NODE, CtrlDeps: ids(un.deps),
					Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_type", int64(commType[nccl.Op(c.Op)])), chakra.Int("comm_size", c.Size),
						chakra.Str("pg_name", names[g]), chakra.Str("fabricsim.group_type", s.Groups[g].Type)}})
			}
		case sPair:
			c := &s.Colls[un.coll]
			from, to := stageOf[un.rep], stageOf[un.peer]
			for _, gi := range pp {
				g := &s.Groups[gi]
				src, dst := g.Ranks[from], g.Ranks[to]
				attrs := func() []*etpb.AttributeProto {
					return []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_src", int64(src)), chakra.Int("comm_dst", int64(dst)),
						chakra.Int("comm_size", c.Size), chakra.Int("comm_tag", int64(u)), chakra.Str("pg_name", names[gi]), chakra.Str("fabricsim.group_type", workload.PP)}
				}
				nodes[src] = append(nodes[src], &etpb.Node{Id: id, Name: label(un, "send"), Type: etpb.NodeType_COMM_SEND_NODE, CtrlDeps: ids(un.deps), Attr: attrs()})
				nodes[dst] = append(nodes[dst], &etpb.Node{Id: id, Name: label(un, "recv"), Type: etpb.NodeType_COMM_RECV_NODE, Attr: attrs()})
			}
		}
	}
	return writeFiles(prefix, nodes, names, ranks)
}
