// Package traffic turns synthetic traffic patterns (uniform random,
// permutation, incast, shifted all-to-all, stencil, nearest neighbour) and
// htsim connection matrices into the flow DAG: messages become transfers,
// their start times delay nodes, htsim's triggers dependencies. It is the
// input side of CODES- and htsim-style network experiments, as
// pkg/collective is of training workloads.
package traffic

import (
	"fmt"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
)

// Message is one point-to-point transfer.
type Message struct {
	Src, Dst int32
	Size     int64
	StartPs  int64   // release time, when After is empty
	After    []int32 // earlier messages whose completion releases this one
}

// MaxMessages bounds one input: each message is a flow, and a backend
// holds a few hundred bytes per flow.
const MaxMessages = 50_000_000

// Emit writes the messages as flows in order (After must name earlier
// messages): a message with a start time depends on a delay node that
// ends at that time (one per distinct time, released at 0), one with
// After on those messages' flows. Flows belong to no collective (-1) and
// are P2P connections without step latency: the wire's own latency is
// the backend's.
func Emit(e *collective.Emitter, msgs []Message) error {
	starts := map[int64]int64{} // start time -> its delay node
	ids := make([]int64, len(msgs))
	var deps []int64
	for i, m := range msgs {
		deps = deps[:0]
		switch {
		case len(m.After) > 0:
			for _, a := range m.After {
				if a < 0 || int(a) >= i {
					return fmt.Errorf("message %d waits for message %d, not an earlier one", i, a)
				}
				deps = append(deps, ids[a])
			}
		case m.StartPs > 0:
			d, ok := starts[m.StartPs]
			if !ok {
				d = e.Delay(-1, m.Src, m.StartPs, nil)
				starts[m.StartPs] = d
			}
			deps = append(deps, d)
		}
		ids[i] = e.Flow(-1, m.Src, m.Dst, m.Size, 0, deps, 0, 0, 1, stream.ConnP2P) // the sink encodes deps at once
	}
	return e.Err()
}
