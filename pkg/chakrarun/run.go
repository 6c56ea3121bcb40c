// Package chakrarun turns per-rank Chakra execution traces into the flow
// DAG (compute nodes as delays, collectives decomposed by the NCCL-style
// planner, send/receive pairs as transfers), and writes a SimAI/AICB
// workload as Chakra traces.
package chakrarun

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

type unitKind int

const (
	uComp    unitKind = iota // a COMP node (or a CPU-side COMM_COLL): a delay
	uColl                    // a collective: one node per rank of its group
	uBarrier                 // a BARRIER collective: one join
	uPair                    // a send matched with its receive: one transfer
	uRecv                    // the receive's own place in its rank's program
	uRooted                  // GATHER or SCATTER: n-1 transfers to or from the group's first rank
)

// unit is what is emitted at once.
type unit struct {
	kind    unitKind
	key     [2]uint64 // emission order among ready units: node id, then rank or group
	nodes   []int     // global node indexes whose deps it waits for (a pair: the send)
	group   int       // uColl, uBarrier, uPair: stream group id
	rec     int64     // its collective record (-1: none); uRooted: the first of its n-1
	pair    int       // uRecv: its pair unit
	waiting int
}

// Run is a planned set of traces: the groups and collective records to
// write, then Emit for the flows.
type Run struct {
	Groups []stream.Group
	Colls  []collective.Coll
	Notes  []string // things a user should know (skipped nodes, CPU ops)

	d      *collective.Decomposer
	traces []*chakra.Trace
	nodes  []*chakra.Node // by global index
	rankOf []int32
	off    []int // first global index of each rank
	byID   []map[uint64]int
	units  []unit
	unitOf []int // the unit resolving each node
	order  []int
	all    []int32
}

// ranksOf is group gid's ranks, every rank for -1.
func (r *Run) ranksOf(gid int) []int32 {
	if gid < 0 {
		return r.all
	}
	return r.Groups[gid].Ranks
}

// Plan matches the traces' collectives and send/receive pairs, orders
// everything and plans the collectives on d (whose fabric has at least as
// many GPUs as there are traces). groups may be nil when every pg_name is
// "" or "0" (all ranks).
func Plan(traces []*chakra.Trace, groups *chakra.Groups, d *collective.Decomposer) (*Run, error) {
	world := len(traces)
	if world > d.Fabric.GPUs {
		return nil, fmt.Errorf("%s: %d ranks have traces, the topology has %d GPUs", traces[world-1].File, world, d.Fabric.GPUs)
	}
	r := &Run{d: d, traces: traces}
	for rank, t := range traces {
		r.off = append(r.off, len(r.nodes))
		ids := make(map[uint64]int, len(t.Nodes))
		for i := range t.Nodes {
			ids[t.Nodes[i].ID] = len(r.nodes)
			r.nodes = append(r.nodes, &t.Nodes[i])
			r.rankOf = append(r.rankOf, int32(rank))
		}
		r.byID = append(r.byID, ids)
		if len(t.Skipped) > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: skipped %v (not run; dependencies through them kept)", t.File, t.Skipped))
		}
	}
	// Dependencies on nodes the trace does not hold (PyTorch traces name
	// their removed root and thread nodes) are dropped, with a note.
	// A ctrl_dep on a node later in the file is dropped too: PyTorch's
	// traces (schema 1.0.x) hold operator/kernel pairs whose ctrl_deps and
	// data_deps point at each other, a cycle no run could start (Chakra's
	// own feeder follows data_deps alone).
	missing, forward := 0, 0
	for g, n := range r.nodes {
		ids := r.byID[r.rankOf[g]]
		keep := func(l []uint64, ctrl bool) []uint64 {
			var out []uint64
			for _, d := range l {
				dg, ok := ids[d]
				switch {
				case !ok:
					missing++
				case ctrl && dg > g:
					forward++
				default:
					out = append(out, d)
				}
			}
			return out
		}
		n.CtrlDeps, n.DataDeps = keep(n.CtrlDeps, true), keep(n.DataDeps, false)
	}
	if missing > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d dependencies name nodes their trace does not hold: dropped", missing))
	}
	if forward > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d ctrl_deps name a node later in their file: dropped (Chakra's feeder follows data_deps only; these would close cycles)", forward))
	}
	r.unitOf = make([]int, len(r.nodes))
	r.all = make([]int32, world)
	for i := range r.all {
		r.all[i] = int32(i)
	}
	var err error
	// Groups: the file's, in its order, then all ranks and send/receive
	// pairs as they come.
	groupID := map[string]int{}
	typeOf := map[string]string{}
	for _, n := range r.nodes {
		if n.GroupType != "" {
			typeOf[n.PGName] = n.GroupType
		}
	}
	if groups != nil {
		for i, name := range groups.Names {
			groupID[name] = len(r.Groups)
			r.Groups = append(r.Groups, stream.Group{ID: int64(i), Type: groupType(typeOf[name]), Ranks: groups.Ranks[i]})
		}
	}
	const allKey = "\x00all" // no file's name: pg_name "" and "0" are every rank
	group := func(g int, pg string) (int, error) {
		key := pg
		if pg == "" || pg == "0" {
			key = allKey
		}
		if id, ok := groupID[key]; ok {
			return id, nil
		}
		if key != allKey {
			if groups == nil {
				return 0, &nodeErr{g, "attr pg_name", fmt.Errorf("group %q needs a group file (--comm-groups)", pg)}
			}
			return 0, &nodeErr{g, "attr pg_name", fmt.Errorf("group %q is not in %s", pg, groups.File)}
		}
		id := len(r.Groups)
		groupID[key] = id
		r.Groups = append(r.Groups, stream.Group{ID: int64(id), Type: groupType(typeOf[pg]), Ranks: r.all})
		return id, nil
	}
	insts := map[[2]int][]int{} // by group and its k-th collective: the unit
	seq := map[[2]int]int{}     // by group and rank: collectives so far
	type p2p struct{ src, dst, tag int64 }
	sends := map[p2p][]int{} // unmatched sends' pair units
	recvs := map[p2p][]int{} // receives waiting for their send: recv units
	pairGroup := map[[2]int32]int{}
	for g, n := range r.nodes {
		rank := r.rankOf[g]
		switch {
		case n.Kind == chakra.Comp || (n.Kind == chakra.Coll && n.IsCPUOp):
			r.add(g, unit{kind: uComp, key: [2]uint64{n.ID, uint64(rank)}, nodes: []int{g}, rec: -1})
		case n.Kind == chakra.Coll:
			gid := -1 // a barrier on every rank: one join, no group record
			if n.CommType != etpb.CollectiveCommType_BARRIER || (n.PGName != "" && n.PGName != "0") {
				if gid, err = group(g, n.PGName); err != nil {
					return nil, r.wrap(err)
				}
			}
			ranks := r.ranksOf(gid)
			pos := -1
			for i, x := range ranks {
				if x == rank {
					pos = i
				}
			}
			if pos < 0 {
				return nil, r.wrap(&nodeErr{g, "attr pg_name", fmt.Errorf("rank %d is not in group %q (%v)", rank, n.PGName, ranks)})
			}
			k := seq[[2]int{gid, int(rank)}]
			seq[[2]int{gid, int(rank)}] = k + 1
			members := insts[[2]int{gid, k}]
			if members == nil {
				members = make([]int, len(ranks))
				for i := range members {
					members[i] = -1
				}
				insts[[2]int{gid, k}] = members
			}
			members[pos] = g
		case n.Kind == chakra.Send:
			if n.CommDst < 0 || n.CommDst >= int64(world) || n.CommDst == int64(rank) {
				return nil, r.wrap(&nodeErr{g, "attr comm_dst", fmt.Errorf("rank %d: not another of the %d ranks with a trace", n.CommDst, world)})
			}
			pk := [2]int32{rank, int32(n.CommDst)}
			gid, ok := pairGroup[pk]
			if n.PGName != "" {
				var err error
				if gid, err = group(g, n.PGName); err != nil {
					return nil, r.wrap(err)
				}
			} else if !ok {
				gid = len(r.Groups)
				r.Groups = append(r.Groups, stream.Group{ID: int64(gid), Type: workload.PP, Ranks: []int32{pk[0], pk[1]}})
				pairGroup[pk] = gid
			}
			u := r.add(g, unit{kind: uPair, key: [2]uint64{n.ID, uint64(gid)}, nodes: []int{g}, group: gid, rec: -1})
			key := p2p{int64(rank), n.CommDst, n.CommTag}
			if q := recvs[key]; len(q) > 0 {
				r.link(q[0], u)
				recvs[key] = q[1:]
			} else {
				sends[key] = append(sends[key], u)
			}
		case n.Kind == chakra.Recv:
			if n.CommSrc < 0 || n.CommSrc >= int64(world) || n.CommSrc == int64(rank) {
				return nil, r.wrap(&nodeErr{g, "attr comm_src", fmt.Errorf("rank %d: not another of the %d ranks with a trace", n.CommSrc, world)})
			}
			u := r.add(g, unit{kind: uRecv, key: [2]uint64{n.ID, uint64(rank)}, nodes: []int{g}, rec: -1, pair: -1})
			key := p2p{n.CommSrc, int64(rank), n.CommTag}
			if q := sends[key]; len(q) > 0 {
				r.link(u, q[0])
				sends[key] = q[1:]
			} else {
				recvs[key] = append(recvs[key], u)
			}
		}
	}
	for _, q := range sends {
		if len(q) > 0 {
			g := r.units[q[0]].nodes[0]
			return nil, r.wrap(&nodeErr{g, "attr comm_dst", fmt.Errorf("no COMM_RECV on rank %d from rank %d with tag %d", r.nodes[g].CommDst, r.rankOf[g], r.nodes[g].CommTag)})
		}
	}
	for _, q := range recvs {
		if len(q) > 0 {
			g := r.units[q[0]].nodes[0]
			return nil, r.wrap(&nodeErr{g, "attr comm_src", fmt.Errorf("no COMM_SEND on rank %d to rank %d with tag %d", r.nodes[g].CommSrc, r.rankOf[g], r.nodes[g].CommTag)})
		}
	}
	// Collectives, matched by their order within the group.
	keys := slices.SortedFunc(maps.Keys(insts), func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	for _, key := range keys {
		members := insts[key]
		var first, missing = -1, -1
		for i, g := range members {
			if g < 0 {
				missing = i
			} else if first < 0 {
				first = g
			}
		}
		gr := stream.Group{Ranks: r.ranksOf(key[0])}
		if missing >= 0 {
			return nil, r.wrap(&nodeErr{first, "attr pg_name", fmt.Errorf("collective %d of group %q has no counterpart on rank %d (its trace has only %d collectives on the group)",
				key[1]+1, r.nodes[first].PGName, gr.Ranks[missing], seq[[2]int{key[0], int(gr.Ranks[missing])}])})
		}
		n0 := r.nodes[first]
		minID := n0.ID
		for _, g := range members {
			n := r.nodes[g]
			if n.CommType != n0.CommType {
				return nil, r.wrap(&nodeErr{g, "attr comm_type", fmt.Errorf("%s, where rank %d's matching collective is %s", n.CommType, r.rankOf[first], n0.CommType)})
			}
			if n.CommSize != n0.CommSize {
				return nil, r.wrap(&nodeErr{g, "attr comm_size", fmt.Errorf("%d, where rank %d's matching collective has %d", n.CommSize, r.rankOf[first], n0.CommSize)})
			}
			minID = min(minID, n.ID)
		}
		kind := uColl
		if n0.CommType == etpb.CollectiveCommType_BARRIER {
			kind = uBarrier
		} else if rooted(n0.CommType) {
			kind = uRooted
		} else if _, err := opOf(n0.CommType); err != nil {
			return nil, r.wrap(&nodeErr{first, "attr comm_type", err})
		}
		u := unit{kind: kind, key: [2]uint64{minID, uint64(key[0])}, nodes: members, group: key[0], rec: -1}
		for _, g := range members {
			r.unitOf[g] = len(r.units)
		}
		r.units = append(r.units, u)
	}
	if err := r.schedule(); err != nil {
		return nil, err
	}
	return r, r.records()
}

// add makes a unit resolving node g.
func (r *Run) add(g int, u unit) int {
	r.unitOf[g] = len(r.units)
	r.units = append(r.units, u)
	return len(r.units) - 1
}

// link ties a receive to its send's pair unit: the receive resolves after
// the transfer.
func (r *Run) link(recv, pair int) {
	r.units[recv].pair = pair
	r.units[recv].nodes = append(r.units[recv].nodes, -1-pair) // a wait on the pair itself
}

func groupType(t string) string {
	switch t {
	case workload.TP, workload.DP, workload.PP, workload.EP, workload.DPEP:
		return t
	}
	return workload.DP
}

// opOf maps a Chakra collective to fabricsim's.
func opOf(t etpb.CollectiveCommType) (nccl.Op, error) {
	switch t {
	case etpb.CollectiveCommType_ALL_REDUCE:
		return nccl.AllReduce, nil
	case etpb.CollectiveCommType_ALL_GATHER:
		return nccl.AllGather, nil
	case etpb.CollectiveCommType_REDUCE_SCATTER, etpb.CollectiveCommType_REDUCE_SCATTER_BLOCK:
		return nccl.ReduceScatter, nil
	case etpb.CollectiveCommType_ALL_TO_ALL:
		return nccl.AllToAll, nil
	case etpb.CollectiveCommType_BROADCAST:
		return nccl.Broadcast, nil
	case etpb.CollectiveCommType_REDUCE:
		return nccl.Reduce, nil
	}
	return "", fmt.Errorf("%s has no decomposition in fabricsim (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, REDUCE, GATHER, SCATTER, BARRIER do)", t)
}

// rooted: GATHER and SCATTER, which NCCL has no collective for. They run
// as nccl-tests' gather and scatter do (grouped ncclSend/ncclRecv): the
// root, the group's first rank (as a Broadcast's here), receives from or
// sends to every other rank its piece of comm_size / n (comm_size is the
// root's full buffer, as nccl-tests sizes them; ASTRA-sim's workload
// layer refuses both types, so defines no size for them).
func rooted(t etpb.CollectiveCommType) bool {
	return t == etpb.CollectiveCommType_GATHER || t == etpb.CollectiveCommType_SCATTER
}

// piece is rank position i's share of size over n ranks (the first
// size mod n positions take a byte more).
func piece(size int64, n, i int) int64 {
	p := size / int64(n)
	if int64(i) < size%int64(n) {
		p++
	}
	return p
}

// nodeErr is an error about global node g, made a chakra.Error by wrap.
type nodeErr struct {
	g     int
	field string
	err   error
}

func (e *nodeErr) Error() string { return e.err.Error() }

func (r *Run) wrap(err error) error {
	var ne *nodeErr
	if !errors.As(err, &ne) {
		return err
	}
	n := r.nodes[ne.g]
	id := n.ID
	return &chakra.Error{File: r.traces[r.rankOf[ne.g]].File, Record: n.Index, NodeID: &id, Field: ne.field, Err: ne.err}
}

// depUnits are the units unit u waits for (with repeats).
func (r *Run) depUnits(u int, each func(dep int) error) error {
	for _, g := range r.units[u].nodes {
		if g < 0 {
			if err := each(-1 - g); err != nil {
				return err
			}
			continue
		}
		rank := r.rankOf[g]
		n := r.nodes[g]
		for i, list := range [][]uint64{n.CtrlDeps, n.DataDeps} {
			for _, d := range list {
				dg, ok := r.byID[rank][d]
				if !ok {
					return &nodeErr{g, [...]string{"ctrl_deps", "data_deps"}[i], fmt.Errorf("node id %d is not in the trace", d)}
				}
				if err := each(r.unitOf[dg]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// schedule orders the units: among those whose dependencies are done,
// the one of the lowest node id first.
func (r *Run) schedule() error {
	dependants := make([][]int, len(r.units))
	for u := range r.units {
		err := r.depUnits(u, func(dep int) error {
			if dep == u {
				return nil // a collective member waiting on... itself: impossible, ignored
			}
			r.units[u].waiting++
			dependants[dep] = append(dependants[dep], u)
			return nil
		})
		if err != nil {
			return r.wrap(err)
		}
	}
	q := &ready{units: r.units}
	for u := range r.units {
		if r.units[u].waiting == 0 {
			heap.Push(q, u)
		}
	}
	r.order = make([]int, 0, len(r.units))
	for q.Len() > 0 {
		u := heap.Pop(q).(int)
		r.order = append(r.order, u)
		for _, v := range dependants[u] {
			if r.units[v].waiting--; r.units[v].waiting == 0 {
				heap.Push(q, v)
			}
		}
	}
	if len(r.order) < len(r.units) {
		for g := range r.nodes {
			if u := r.unitOf[g]; r.units[u].waiting > 0 {
				return r.wrap(&nodeErr{g, "ctrl_deps", errors.New("never runs: it waits in a cycle, or for a collective or transfer whose other side waits for it")})
			}
		}
	}
	return nil
}

type ready struct {
	units []unit
	ids   []int
}

func (q *ready) Len() int { return len(q.ids) }
func (q *ready) Less(i, j int) bool {
	a, b := q.units[q.ids[i]].key, q.units[q.ids[j]].key
	if a[0] != b[0] {
		return a[0] < b[0]
	}
	if a[1] != b[1] {
		return a[1] < b[1]
	}
	return q.ids[i] < q.ids[j]
}
func (q *ready) Swap(i, j int) { q.ids[i], q.ids[j] = q.ids[j], q.ids[i] }
func (q *ready) Push(x any)    { q.ids = append(q.ids, x.(int)) }
func (q *ready) Pop() any {
	x := q.ids[len(q.ids)-1]
	q.ids = q.ids[:len(q.ids)-1]
	return x
}

// records plans the collectives and numbers every record in emission
// order; compute nodes of one id (one step of a written workload) share a
// record.
func (r *Run) records() error {
	compRec := map[uint64]int64{}
	cpu := 0
	for _, u := range r.order {
		un := &r.units[u]
		switch un.kind {
		case uComp:
			n := r.nodes[un.nodes[0]]
			if n.Kind == chakra.Coll {
				cpu++
			}
			if id, ok := compRec[n.ID]; ok {
				un.rec = id
				continue
			}
			un.rec = int64(len(r.Colls))
			compRec[n.ID] = un.rec
			r.Colls = append(r.Colls, collective.Coll{Rec: collective.ComputeRecord(un.rec, n.Name), Compute: true, Plan: collective.Plan{NoOp: true}})
		case uColl, uPair:
			gr := r.Groups[un.group]
			n := r.nodes[un.nodes[0]]
			op, ranks := nccl.SendRecv, []int32{r.rankOf[un.nodes[0]], int32(n.CommDst)}
			if un.kind == uColl {
				op, _ = opOf(n.CommType)
				ranks = gr.Ranks
			}
			c, err := r.d.NewColl(int64(len(r.Colls)), op, n.CommSize, gr.Type, gr.ID, ranks, n.Name)
			if err != nil {
				return r.wrap(&nodeErr{un.nodes[0], "attr comm_size", err})
			}
			un.rec = c.Rec.ID
			r.Colls = append(r.Colls, c)
		case uRooted:
			gr := r.Groups[un.group]
			n := r.nodes[un.nodes[0]]
			un.rec = int64(len(r.Colls))
			root := gr.Ranks[0]
			for i, peer := range gr.Ranks[1:] {
				ranks := []int32{peer, root}
				if n.CommType == etpb.CollectiveCommType_SCATTER {
					ranks = []int32{root, peer}
				}
				c, err := r.d.NewColl(int64(len(r.Colls)), nccl.SendRecv, piece(n.CommSize, len(gr.Ranks), i+1), gr.Type, gr.ID, ranks,
					fmt.Sprintf("%s (%s, rank %d)", n.Name, strings.ToLower(n.CommType.String()), peer))
				if err != nil {
					return r.wrap(&nodeErr{un.nodes[0], "attr comm_size", err})
				}
				r.Colls = append(r.Colls, c)
			}
		}
	}
	if cpu > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d CPU-side COMM_COLL nodes (is_cpu_op) run as their host time only, as compute", cpu))
	}
	return nil
}

// Emit writes the flows in the planned order. Each node's entry is the
// union, in ctrl_deps then data_deps order, of what its dependencies left.
func (r *Run) Emit(e *collective.Emitter) error {
	exit := make([][]int64, len(r.nodes))
	pairRecv := map[int][]int64{}
	entry := func(g int) []int64 {
		var out []int64
		n := r.nodes[g]
		for _, d := range n.Deps() {
			out = collective.Union(out, exit[r.byID[r.rankOf[g]][d]])
		}
		return out
	}
	for _, u := range r.order {
		un := &r.units[u]
		switch un.kind {
		case uComp:
			g := un.nodes[0]
			exit[g] = []int64{e.Delay(un.rec, r.rankOf[g], r.nodes[g].DurationPicos(), entry(g))}
		case uBarrier:
			var all []int64
			for _, g := range un.nodes {
				all = collective.Union(all, entry(g))
			}
			var j []int64
			if len(all) > 0 {
				j = []int64{e.Delay(-1, r.rankOf[un.nodes[0]], 0, all)}
			}
			for _, g := range un.nodes {
				exit[g] = j
			}
		case uColl:
			c := &r.Colls[un.rec]
			at := map[int32]int{}
			for _, g := range un.nodes {
				at[r.rankOf[g]] = g
			}
			exits, err := r.d.EmitCollective(e, c, false, func(rank int32) []int64 { return entry(at[rank]) })
			if err != nil {
				return err
			}
			for p, rank := range c.Ranks {
				exit[at[rank]] = exits[p]
			}
		case uRooted:
			at := map[int32]int{}
			for _, g := range un.nodes {
				at[r.rankOf[g]] = g
			}
			ranks := r.Groups[un.group].Ranks
			root := ranks[0]
			exit[at[root]] = entry(at[root])
			for i, peer := range ranks[1:] {
				c := &r.Colls[un.rec+int64(i)]
				// Both sides have entered: the root's receive (or send) and the peer's.
				both := collective.Union(entry(at[peer]), entry(at[root]))
				exits, err := r.d.EmitCollective(e, c, true, func(int32) []int64 { return both })
				if err != nil {
					return err
				}
				p, q := 0, 1 // the peer's side, the root's
				if c.Ranks[0] == root {
					p, q = 1, 0
				}
				exit[at[peer]] = exits[p]
				if i == 0 {
					exit[at[root]] = nil
				}
				exit[at[root]] = collective.Union(exit[at[root]], exits[q])
			}
		case uPair:
			g := un.nodes[0]
			c := &r.Colls[un.rec]
			exits, err := r.d.EmitCollective(e, c, true, func(int32) []int64 { return entry(g) })
			if err != nil {
				return err
			}
			exit[g] = exits[0]
			pairRecv[u] = exits[1]
		case uRecv:
			g := un.nodes[0]
			exit[g] = collective.Union(entry(g), pairRecv[un.pair])
			delete(pairRecv, un.pair)
		}
		if err := e.Err(); err != nil {
			return err
		}
	}
	return e.Err()
}
