package collective

import (
	"fmt"
	"math"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// EmitCollective writes collective c, planned for c.Ranks, at flow
// granularity, as Emit writes a workload's: each rank's entry is what
// wait returns for it (then NCCL's launch latency), and the result is what
// each rank's next operation waits for. transfer makes it a point-to-point
// transfer from c.Ranks[0] to c.Ranks[1] (a SendRecv plan): the receiver's
// side starts when the data arrives. For inputs that are not a Workload
// (Chakra traces), which keep their own cursors.
func (d *Decomposer) EmitCollective(e *Emitter, c *Coll, transfer bool, wait func(r int32) []int64) ([][]int64, error) {
	e.sendLat = d.Planner.Opt.SendLatPs
	f0, b0 := e.Flows, e.WireBytes
	exits, err := d.emitGroup(e, c, d.cut(), transfer, false, wait)
	c.Flows, c.WireBytes = e.Flows-f0, e.WireBytes-b0
	return exits, err
}

// Union merges two dependency lists as Emit does: a's ids, then b's not
// in a.
func Union(a, b []int64) []int64 { return union(a, b) }

// NewColl plans op on ranks (a group of groupType, stream id groupID) and
// fills its record as Prepare does for a workload's collective step.
func (d *Decomposer) NewColl(id int64, op Op, size int64, groupType string, groupID int64, ranks []int32, label string) (Coll, error) {
	s := Step{Op: op, Size: size, Group: groupType, Label: label}
	pl, err := d.Planner.Plan(op, size, groupType, ranks)
	if err != nil {
		return Coll{}, fmt.Errorf("%s %s of %d bytes on %s: %v", label, op, size, groupType, err)
	}
	rec := record(stream.Collective{ID: id, Op: string(op), Size: size, Group: groupID, Algorithm: pl.Algo.String(),
		Protocol: pl.Proto.String(), Channels: pl.Channels, PXN: pl.PXN, PredictedPs: int64(math.Round(pl.PredictedUs * 1e6)), Label: label,
		Cut: d.cutRecord(pl, op), SendLatPs: d.sendLat(pl)}, s)
	return Coll{Rec: rec, GroupType: groupType, Ranks: ranks, Plan: pl}, nil
}

// ComputeRecord is the record of a compute phase, as Prepare makes it.
func ComputeRecord(id int64, label string) stream.Collective {
	return record(stream.Collective{ID: id, Op: stream.OpCompute, Group: -1, Label: label}, Step{})
}
