package analytical

import "github.com/fabricsim/fabricsim/pkg/route"

// rotate maps the path of a flow whose group stands for its images under
// the pod rotation (Options.ApproxPodRotation, expand/podrot.go) onto its
// links' orbits: each link becomes its orbit's first, which then carries
// what the flow and its images put on any link of the orbit. Two links of
// one orbit (a path no ring hop takes on topogen's trees) merge, their
// weights summed. w is the path's weights (nil: 1 each).
func (e *engine) rotate(path []route.DirLink, w []float32) ([]route.DirLink, []float32) {
	out := e.rotPath[:0]
	dup := false
	for _, l := range path {
		c := e.rot.Canon(l)
		for _, o := range out {
			dup = dup || o == c
		}
		out = append(out, c)
	}
	e.rotPath = out
	if !dup {
		return out, w
	}
	merged, mw := out[:0], e.rotW[:0]
	for k, c := range out {
		x := float32(1)
		if w != nil {
			x = w[k]
		}
		at := -1
		for j, o := range merged {
			if o == c {
				at = j
			}
		}
		if at >= 0 {
			mw[at] += x
			continue
		}
		merged, mw = append(merged, c), append(mw, x)
	}
	e.rotPath, e.rotW = merged, mw
	return merged, mw
}
