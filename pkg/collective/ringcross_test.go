package collective

import "testing"

func TestRingCrossings(t *testing.T) {
	for _, c := range []struct {
		op                Op
		n, nNodes         int
		wantSteps, wantIn int64
	}{
		{AllGather, 16, 2, 15, 2},   // 8 + 8: out of each server once
		{ReduceScatter, 8, 1, 7, 0}, // one server: no crossing
		{AllReduce, 16, 2, 30, 4},   // reduce then gather
		{AllReduce, 12, 12, 22, 22}, // one rank a server: 24 crossings, 22 steps
		{AllGather, 12, 12, 11, 11}, // every step crosses
		{AllReduce, 32, 4, 62, 8},   // 4 x 8
	} {
		s, in := RingCrossings(c.op, c.n, c.nNodes)
		if s != c.wantSteps || in != c.wantIn {
			t.Errorf("RingCrossings(%s, %d, %d) = %d, %d; want %d, %d", c.op, c.n, c.nNodes, s, in, c.wantSteps, c.wantIn)
		}
	}
}
