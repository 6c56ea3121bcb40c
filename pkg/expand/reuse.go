package expand

import (
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// Reusing a group's time (UseReuse). A COLL node that Symmetry marks has
// a group that stands for its siblings (its first, or fabricsym.go's
// representative): from the node's release until its last flow ends, that
// group's flows are the only ones on its links (its server's NVLinks, or
// its GPUs' links to their switches), which is what lets it stand for
// the others. Its flows then run as they would alone: max-min rates on
// its links depend only on its flows, the flows on the collective's shape
// and the group's ranks, and the fluid model's times only on differences
// of times (integer picoseconds; rates and bits are relative to when a
// rate was set). So the same collective shape on the same group, marked
// again later, takes the same time from its release to its last flow's
// end, to the picosecond. SimAI's 9216-GPU example runs an EP AllToAll of
// one shape on one stage's groups 24 microbatches x 2 directions x its
// layers times.
//
// The first time, the group runs and the time is kept (by shape, group,
// and what else the expansion depends on: channel merging, SimAI replay);
// each later time one delay of that length stands for the group's flows,
// and its groups that run for themselves (on a GPU another node may
// overlap) still run in full. The counts (Made, Bytes, Mirrored,
// ChannelsMerged) are those of the run that made the flows; Peak is not.
// The delay's end is queued at the node's release, where the group's last
// flow's end was queued later: of two nodes that end in the same
// picosecond, the trace may list them in the other order (hence opt-in).

// UseReuse lets a marked COLL node's standing group take, instead of its
// flows, the time the same group took on the same collective shape the
// last time it ran (see above). clock is the backend's current time. Only
// a model in which a group alone on its links runs in a time that depends
// on nothing else may use it (the fluid model), with UseSymmetry.
func (x *Store) UseReuse(clock func() des.Time) {
	x.clock = clock
	x.reuse = map[string]reuseRec{}
	x.replayed = x.in.Replayed()
}

// Reused is the COLL nodes whose standing group took a kept time instead
// of running, and the flows (Made) that stood for.
func (x *Store) Reused() (nodes, flows int64) { return x.reusedNodes, x.reusedFlows }

// reuseRec is a kept time and the counts of the run that made it.
type reuseRec struct {
	span                des.Time
	made, bytes, chanms int64 // per group: flows (merged channels' included), transfer bytes, merged channels' flows
}

// reuseState is a set's: the key its standing group is kept under ("":
// none), when it was released, and while it runs, its flows (hidden joins
// included) not complete and the counts so far.
type reuseState struct {
	key  string
	at   des.Time
	left int32
	rec  reuseRec
	gpus []int32 // approxidle.go: the GPUs no transfer may meet for the time to be kept
}

// reuseKey names what the standing group's time depends on: the
// collective's shape, the group (its ranks), merged channels, SimAI's
// replay.
func (x *Store) reuseKey(i int32, gid int64, merged bool) string {
	f := x.in.Flow(i)
	rec := x.in.Collectives[f.Coll]
	b := []byte(shapeKey(rec))
	b = append(b, '#')
	b = strconv.AppendInt(b, gid, 10)
	b = append(b, '#', byte('0'+b2i(merged)), byte('0'+b2i(x.replayed[f.Coll])))
	return string(b)
}

// groupID is the id of position k among a node's groups (its own, then
// its siblings').
func (x *Store) groupID(id int64, k int) int64 {
	if k == 0 {
		return id
	}
	return x.in.Groups[id].Siblings[k-1]
}

// reuseDelay makes, in set s, the delay standing for its group's kept
// time, counted as the flows it stands for; it is ready at once.
func (x *Store) reuseDelay(s int32, r reuseRec, copies int64) error {
	slot, err := x.delaySlot(s, r.span)
	if err != nil {
		return err
	}
	x.waiting[slot] = 0
	x.ready = append(x.ready, slot+x.base)
	if u := &x.sets[s].areuse; u.key != "" { // the node's time is kept: count what it stands for
		u.rec.made += r.made * (1 + copies)
		u.rec.bytes += r.bytes * (1 + copies)
	}
	x.total += r.made * (1 + copies)
	x.mirrored += r.made * copies
	x.bytes += r.bytes * (1 + copies)
	x.mirroredB += r.bytes * copies
	x.chanMembers += r.chanms
	x.reusedNodes++
	x.reusedFlows += r.made
	return nil
}

// delaySlot makes, in set s, a delay of span standing for its node's
// flows, counted in flight; the caller makes it ready or has it wait.
func (x *Store) delaySlot(s int32, span des.Time) (int32, error) {
	slot, err := x.alloc()
	if err != nil {
		return 0, err
	}
	set := &x.sets[s]
	d := &x.flows[slot]
	d.Flow = flowset.Flow{ID: set.idBase - 1, Coll: x.in.Flow(set.coll).Coll, Size: int64(span), Kind: flowset.Delay}
	d.set, d.gen, d.row, d.succ, d.first, d.more, d.hidden, d.inRep = s, -1, 0, d.succ[:0], [3]int32{}, [3]bool{}, true, false
	set.left++
	x.inFlight++
	x.peak = max(x.peak, x.inFlight)
	return slot, nil
}

// reuseDone counts a standing group's flow done in set s; the last keeps
// the group's time.
func (x *Store) reuseDone(set *expSet) {
	u := &set.reuse
	if u.left--; u.left > 0 || u.key == "" {
		return
	}
	u.rec.span = x.clock() - u.at
	x.reuse[u.key] = u.rec
	u.key = ""
}
