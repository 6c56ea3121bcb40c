package packet

import (
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// Pairs re-armed over and over leave dead timeouts behind; compaction must
// keep the FIFO within twice the pairs and still pop every live timeout,
// once, in time order: those of pairs armed once, between the others, and
// the last of each re-armed pair; a dead timeout costs no event.
func TestRTOFIFOCompaction(t *testing.T) {
	const cycling, every = 100, 257
	pushes := 3*rtoChunk + 17
	s := &Sim{q: des.NewCalendar(10, 14)}
	s.nic.s = s
	s.nic.qps = make([]qp, cycling+pushes/every+1)
	lastArm := map[int32]int64{}
	maxN := 0
	for k := range pushes {
		qi := int32(k % cycling)
		if k%every == 0 {
			qi = int32(cycling + k/every) // armed once
		}
		s.nic.qps[qi].rtoGen++
		s.nic.pushRTO(int64(k)*1000, qi, s.nic.qps[qi].rtoGen)
		lastArm[qi] = int64(k)
		maxN = max(maxN, s.nic.rto.n)
	}
	if bound := 2*len(s.nic.qps) + rtoChunk + 1; maxN > bound {
		t.Errorf("FIFO held %d entries, more than %d for %d pairs", maxN, bound, len(s.nic.qps))
	}
	var want []int64
	for _, k := range lastArm {
		want = append(want, k)
	}
	slices.Sort(want)
	var got []int64
	last := des.Time(-1)
	events := 0
	for s.q.Len() > 0 {
		ev := s.q.Pop()
		events++
		if ev.Kind != evRTOFIFO || ev.At < last {
			t.Fatalf("event %+v out of order (after %v)", ev, last)
		}
		last = ev.At
		if qi, gen := s.nic.popRTO(); gen >= 0 {
			k := int64(ev.At) / 1000
			if lastArm[qi] != k {
				t.Fatalf("timeout of push %d popped for pair %d, whose last arm is push %d", k, qi, lastArm[qi])
			}
			got = append(got, k)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("live timeouts popped at pushes %v,\nwant %v", got, want)
	}
	// Every pair's timeout died or came due before the first pop: only the
	// live ones cost an event.
	if events != len(want) {
		t.Errorf("%d timeout events for %d live timeouts", events, len(want))
	}
}
