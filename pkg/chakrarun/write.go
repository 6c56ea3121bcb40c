package chakrarun

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// Version is the Chakra schema version the written traces declare (that
// of ASTRA-sim's own microbenchmark traces).
const Version = "0.0.4"

// GroupsFile is the group file written beside PREFIX's traces.
func GroupsFile(prefix string) string { return prefix + ".comm_groups.json" }

// commType is the Chakra collective of fabricsim's op.
var commType = map[nccl.Op]etpb.CollectiveCommType{
	nccl.AllReduce: etpb.CollectiveCommType_ALL_REDUCE, nccl.AllGather: etpb.CollectiveCommType_ALL_GATHER,
	nccl.ReduceScatter: etpb.CollectiveCommType_REDUCE_SCATTER, nccl.AllToAll: etpb.CollectiveCommType_ALL_TO_ALL,
	nccl.Broadcast: etpb.CollectiveCommType_BROADCAST, nccl.Reduce: etpb.CollectiveCommType_REDUCE,
}

// WriteWorkload writes workload w (scheduled for layout l) as one Chakra
// trace per rank, PREFIX.<rank>.et, and ASTRA-sim's group file
// GroupsFile(prefix). Every rank's nodes follow its program as
// collective.Decomposer.Emit runs it: node ids are the step's index (the
// same on every rank), each node depends on its rank's previous
// operations (ctrl_deps) and on its communicator's previous collective;
// asynchronous collectives are joined where the program waits for them,
// pipeline transfers are COMM_SEND/COMM_RECV pairs (tag: the send's step),
// barriers are BARRIER collectives on every rank. Compute times go in
// duration_micros (rounded) and exactly in fabricsim.duration_ps; group
// types in fabricsim.group_type. It returns the files written.
func WriteWorkload(w *workload.Workload, l workload.Layout, prefix string) ([]string, error) {
	world := l.World()
	nodes := make([][]*etpb.Node, world)
	cursor := make([][]uint64, world)
	cc := map[string][][]uint64{}
	pending := map[string]map[int32][]uint64{}
	type recv struct {
		src  int32
		size int64
		tag  int64
		pg   string
		name string
	}
	pendRecv := map[string]map[int32][]recv{}
	groupKey := map[string]int{} // first group's key of each type
	var names []string
	var ranks [][]int32
	groups := map[string][][]int32{}
	per := l.TP * l.DP
	stageRanks := func(s workload.Step) []int32 {
		lo, hi := 0, world
		if s.Staged {
			lo, hi = s.Stage*per, (s.Stage+1)*per
		}
		out := make([]int32, 0, hi-lo)
		for i := lo; i < hi; i++ {
			out = append(out, int32(i))
		}
		return out
	}
	add := func(list []uint64, ids ...uint64) []uint64 {
		for _, id := range ids {
			if !slices.Contains(list, id) {
				list = append(list, id)
			}
		}
		return list
	}
	for si, s := range w.Steps {
		id := uint64(si)
		switch {
		case s.ComputePs > 0:
			for _, r := range stageRanks(s) {
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: s.Label, Type: etpb.NodeType_COMP_NODE, CtrlDeps: cursor[r],
					DurationMicros: uint64(math.Round(float64(s.ComputePs) / 1e6)),
					Attr:           []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("fabricsim.duration_ps", s.ComputePs)}})
				cursor[r] = []uint64{id}
			}
			continue
		case s.Barrier:
			types := slices.Sorted(maps.Keys(cc))
			for r := range world {
				deps := add(nil, cursor[r]...)
				for _, t := range types {
					deps = add(deps, cc[t][r]...)
				}
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: "barrier", Type: etpb.NodeType_COMM_COLL_NODE, CtrlDeps: deps,
					Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_type", int64(etpb.CollectiveCommType_BARRIER)), chakra.Int("comm_size", 0)}})
				cursor[r] = []uint64{id}
				for _, t := range types {
					cc[t][r] = []uint64{id}
				}
			}
			continue
		case s.Wait != "":
			for r, ids := range pending[s.Wait] {
				cursor[r] = add(slices.Clone(cursor[r]), ids...)
			}
			delete(pending, s.Wait)
			for r, rs := range pendRecv[s.Wait] {
				if len(rs) > 1 {
					return nil, fmt.Errorf("step %q: rank %d waits for %d transfers of tag %q at once; a Chakra trace holds one receive per wait", s.Label, r, len(rs), s.Wait)
				}
				v := rs[0]
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: v.name, Type: etpb.NodeType_COMM_RECV_NODE, CtrlDeps: cursor[r],
					Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_src", int64(v.src)), chakra.Int("comm_dst", int64(r)),
						chakra.Int("comm_size", v.size), chakra.Int("comm_tag", v.tag), chakra.Str("pg_name", v.pg), chakra.Str("fabricsim.group_type", workload.PP)}})
				cursor[r] = []uint64{id}
			}
			delete(pendRecv, s.Wait)
			continue
		}
		op, ok := commType[s.Op]
		if !ok && s.Op != nccl.SendRecv {
			return nil, fmt.Errorf("step %q: %s has no Chakra collective type", s.Label, s.Op)
		}
		gs, ok := groups[s.Group]
		if !ok {
			var err error
			if gs, err = l.Groups(s.Group); err != nil {
				return nil, fmt.Errorf("step %q: %v", s.Label, err)
			}
			groups[s.Group] = gs
			groupKey[s.Group] = len(names) + 1
			for _, g := range gs {
				names = append(names, strconv.Itoa(len(names)+1))
				ranks = append(ranks, g)
			}
		}
		transfer := s.Group == workload.PP && s.Staged
		if transfer {
			for gi, g := range gs {
				src, dst := g[s.Stage], g[s.Peer]
				pg := strconv.Itoa(groupKey[s.Group] + gi)
				nodes[src] = append(nodes[src], &etpb.Node{Id: id, Name: s.Label, Type: etpb.NodeType_COMM_SEND_NODE, CtrlDeps: cursor[src],
					Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_src", int64(src)), chakra.Int("comm_dst", int64(dst)),
						chakra.Int("comm_size", s.Size), chakra.Int("comm_tag", int64(si)), chakra.Str("pg_name", pg), chakra.Str("fabricsim.group_type", workload.PP)}})
				cursor[src] = []uint64{id}
				if pendRecv[s.Tag] == nil {
					pendRecv[s.Tag] = map[int32][]recv{}
				}
				pendRecv[s.Tag][dst] = append(pendRecv[s.Tag][dst], recv{src, s.Size, int64(si), pg, s.Label})
			}
			continue
		}
		if cc[s.Group] == nil {
			cc[s.Group] = make([][]uint64, world)
		}
		seen := map[int32]bool{}
		for gi, g := range gs {
			if s.Staged && int(g[0])/per != s.Stage {
				continue
			}
			pg := strconv.Itoa(groupKey[s.Group] + gi)
			for _, r := range g {
				if seen[r] {
					return nil, fmt.Errorf("step %q: rank %d is in two %s groups; a Chakra trace gives a node one group", s.Label, r, s.Group)
				}
				seen[r] = true
				deps := add(add(nil, cursor[r]...), cc[s.Group][r]...)
				nodes[r] = append(nodes[r], &etpb.Node{Id: id, Name: s.Label, Type: etpb.NodeType_COMM_COLL_NODE, CtrlDeps: deps,
					Attr: []*etpb.AttributeProto{chakra.Bool("is_cpu_op", false), chakra.Int("comm_type", int64(op)), chakra.Int("comm_size", s.Size),
						chakra.Str("pg_name", pg), chakra.Str("fabricsim.group_type", s.Group)}})
				if s.Async {
					if pending[s.Tag] == nil {
						pending[s.Tag] = map[int32][]uint64{}
					}
					pending[s.Tag][r] = add(pending[s.Tag][r], id)
				} else {
					cursor[r] = []uint64{id}
				}
				cc[s.Group][r] = []uint64{id}
			}
		}
	}
	return writeFiles(prefix, nodes, names, ranks)
}

func writeRank(name string, nodes []*etpb.Node) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := chakra.NewWriter(f, Version)
	for _, n := range nodes {
		w.Node(n)
	}
	err = w.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

// writeFiles writes each rank's nodes to its trace file, PREFIX.<rank>.et,
// then the group file, and returns the files written.
func writeFiles(prefix string, nodes [][]*etpb.Node, names []string, ranks [][]int32) ([]string, error) {
	var files []string
	for r := range nodes {
		name := chakra.RankFile(prefix, r)
		if err := writeRank(name, nodes[r]); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	gf := GroupsFile(prefix)
	f, err := os.Create(gf)
	if err != nil {
		return files, err
	}
	err = chakra.WriteGroups(f, names, ranks)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return append(files, gf), err
}
