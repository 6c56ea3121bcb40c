package expand

import (
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// Approximate reuse: an APPROXIMATION, opt-in (flowsim-analytical
// --approx-reuse). reuse.go is exact because the group it times runs
// alone on its links. The COLL nodes symmetry cannot mark (DP and DP_EP
// rings across segments, on ECMP-chosen spines) are mostly the same
// collective on groups laid out alike, one per pipeline stage: SimAI's
// 9216-GPU example runs its DP ReduceScatter and AllGather and its DP_EP
// rings once per stage, on 12 stages that are translations of one
// another. Here a COLL node takes, instead of running its groups, the
// time (release to last flow's end) of the first node run with the same
// collective shape on groups of the same placement (or, while that one
// still runs, waits for its time): every group's ranks
// as positions in servers, and each rank's server and fabric segment (or
// pod, or plane) in the order the groups first reach them, so a stage
// that straddles a segment boundary at another rank is not taken for
// one that does not. Every COLL node may, those symmetry marks too, but
// for a node some of whose groups run for themselves because another
// node may overlap them on their GPUs (a pipeline transfer: fabricsym.go):
// those groups load links the other node shares, and with that node's
// time (the pipeline's exposed time) at stake they run, as without
// approximate reuse (on SimAI's example's first 40 lines on 768 GPUs
// in 4 stages, reusing them too took the exposed PP time 24% under the
// exact run's; leaving them, 0.0%).
//
// What is lost: the node's own ECMP draws (its flows would hash onto
// other spines than the timed node's did), the links it would load (the
// flows overlapping it run as if it sent nothing), and what overlapped
// the timed node (its time keeps whatever it met then). The trace
// (fabricsim.approximate), the summary line and fctstats say so.

// UseApproxReuse lets every COLL node (but those above) take
// the time of the first node of the same shape on groups placed alike
// (see above) instead of running. clock is the backend's current time.
func (x *Store) UseApproxReuse(clock func() des.Time) {
	x.clock = clock
	x.areuse = map[string]reuseRec{}
	x.aplace = map[int64]string{}
	x.arun = map[string][]apending{}
	if x.replayed == nil {
		x.replayed = x.in.Replayed()
	}
}

// ApproxReused is the COLL nodes that took another node's time instead
// of running (UseApproxReuse), the flows they stood for, and how many of
// those nodes waited for the time of one still running.
func (x *Store) ApproxReused() (nodes, flows, waited int64) {
	return x.areusedNodes, x.areusedFlows, x.awaited
}

// Waits reports whether the COLL node Expand last started, though it
// made no flow ready, waits for the time of one placed alike that is
// running (UseApproxReuse): it does not end at once.
func (x *Store) Waits() bool { return x.awaits }

// approxKey names what UseApproxReuse matches COLL node i on: its
// collective's shape, SimAI's replay, whether its channels may be merged,
// and its groups' placement (placement).
func (x *Store) approxKey(i int32, groups [][]int32, merged bool) string {
	f := x.in.Flow(i)
	rec := x.in.Collectives[f.Coll]
	p, ok := x.aplace[rec.Group]
	if !ok {
		p = x.placement(groups)
		x.aplace[rec.Group] = p
	}
	b := []byte(shapeKey(rec))
	b = append(b, '#', byte('0'+b2i(merged)), byte('0'+b2i(x.replayed[f.Coll])), '#')
	return string(b) + p
}

// placement names groups' ranks up to a translation of the fabric: per
// rank its server, its segment (Node.Group) and plane, each numbered in
// order of first appearance over all the groups, and its GPU index in
// its server relative to the first rank's.
func (x *Store) placement(groups [][]int32) string {
	if x.local == nil {
		x.local, x.perServer = localIndexes(x.in.Topology)
	}
	t := x.in.Topology
	servers, segs, planes := map[int32]int32{}, map[int32]int32{}, map[int8]int32{}
	var b []byte
	l0 := int32(-1)
	for _, g := range groups {
		b = append(b, '|')
		for _, r := range g {
			if r < 0 || int(r) >= t.GPUs {
				return "bad:" + strconv.Itoa(int(r))
			}
			nd := &t.Nodes[r]
			l := x.local[r]
			if l0 < 0 {
				l0 = l
			}
			n := max(x.perServer[r], 1)
			b = strconv.AppendInt(b, int64(ord(servers, nd.Server)), 36)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(((l-l0)%n+n)%n), 36)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(ord(segs, nd.Group)), 36)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(ord(planes, nd.Plane)), 36)
			b = append(b, ',')
		}
	}
	return string(b)
}

// ord is v's number in order of first appearance among m's keys.
func ord[K comparable](m map[K]int32, v K) int32 {
	o, ok := m[v]
	if !ok {
		o = int32(len(m))
		m[v] = o
	}
	return o
}

// apending is a node waiting for the time of one placed alike that is
// running: its delay's slot and its release.
type apending struct {
	slot int32
	at   des.Time
}

// approxDone keeps, when set's node ends, its time under its key, and
// makes ready the delays of the nodes placed alike that waited for it
// (appended to out).
func (x *Store) approxDone(s int32, out []int32) []int32 {
	u := &x.sets[s].areuse
	if u.key == "" {
		return out
	}
	u.rec.span = x.clock() - u.at
	// A run a stream transfer met (approxidle.go) is not the node's own
	// time: its waiters take it, later nodes run again.
	if u.gpus == nil || !x.metSince(s, u.gpus, u.at) {
		x.areuse[u.key] = u.rec
	}
	u.gpus = nil
	for _, p := range x.arun[u.key] {
		d := &x.flows[p.slot]
		// Released after the timed node, so ending no earlier than now.
		d.Size = int64(p.at + u.rec.span - x.clock())
		x.waiting[p.slot] = 0
		x.counted(u.rec)
		out = append(out, p.slot+x.base)
	}
	delete(x.arun, u.key)
	u.key = ""
	return out
}

// counted counts a node that took r's time instead of running.
func (x *Store) counted(r reuseRec) {
	x.total += r.made
	x.bytes += r.bytes
	x.areusedNodes++
	x.areusedFlows += r.made
}

// approxDelay makes, in set s, the delay standing for its node's kept
// time r: the node runs no group. With pend, the key of a node placed
// alike that is running, the delay waits for that node's time instead.
func (x *Store) approxDelay(s int32, r reuseRec, pend string) error {
	slot, err := x.delaySlot(s, r.span)
	if err != nil {
		return err
	}
	if pend != "" {
		x.awaited++
		x.waiting[slot] = 1
		x.arun[pend] = append(x.arun[pend], apending{slot: slot, at: x.clock()})
		return nil
	}
	x.waiting[slot] = 0
	x.ready = append(x.ready, slot+x.base)
	x.counted(r)
	return nil
}
