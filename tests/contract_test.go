package tests

import (
	"bytes"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/analytical"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/packet"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// The backend contract: a flow set is read-only during a run (release
// times, the DAG's progress and the row writer's cache are each run's
// own), so one set in memory serves several runs in one process. Fluid
// twice on one set gives the same rows, and fluid then packet on one set
// give what each gives on a set of its own, packet twice the same, at flow
// and (expanded) collective granularity.
func TestBackendsShareOneSet(t *testing.T) {
	topology := mustRun(t, nil, "topogen", "--gpus", "16")
	for _, tc := range []struct {
		name   string
		extra  []string
		expand bool
	}{
		{"flows", nil, false},
		{"collectives expanded", []string{"--granularity", "collective"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := mustRun(t, topology, "simccl-decompose", append([]string{"--op", "allreduce", "--size", "4MiB", "--group", "dp", "--tp", "8"}, tc.extra...)...)
			load := func() *flowset.Set {
				t.Helper()
				r, err := stream.NewReader(bytes.NewReader(data), "ar16")
				if err != nil {
					t.Fatal(err)
				}
				set, err := flowset.Read(r)
				if err != nil {
					t.Fatal(err)
				}
				return set
			}
			fluid := func(set *flowset.Set) []trace.Row {
				t.Helper()
				var rows []trace.Row
				if _, err := analytical.Run(set, analytical.Options{Model: analytical.Fluid, Expand: tc.expand}, func(r *trace.Row) error {
					rows = append(rows, *r)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return rows
			}
			pkt := func(set *flowset.Set) []trace.Row {
				t.Helper()
				r, err := route.New(set.Topology)
				if err != nil {
					t.Fatal(err)
				}
				fl := packet.FromSet(set)
				if tc.expand {
					fl.Expand(0)
				}
				s, err := packet.New(set.Topology, r, packet.DefaultConfig(), fl, 1)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Run(); err != nil {
					t.Fatal(err)
				}
				var rows []trace.Row
				w := set.Rows()
				for i := int32(0); int(i) < set.Flows(); i++ {
					rows = append(rows, w.Row(i, fl.Result(i)))
				}
				return rows
			}

			shared := load()
			records := func() []flowset.Flow {
				var fs []flowset.Flow
				for i := int32(0); int(i) < shared.Flows(); i++ {
					fs = append(fs, *shared.Flow(i))
				}
				return fs
			}
			before := records()
			first := fluid(shared)
			if len(first) != shared.Flows() {
				t.Fatalf("fluid: %d rows for %d flows", len(first), shared.Flows())
			}
			// Every flow waits on the ones before it in the ring, so a
			// later run that saw the first's progress would end at once.
			if again := fluid(shared); !slices.Equal(again, first) {
				t.Errorf("fluid twice on one set: the second run's rows differ from the first's")
			}
			pShared := pkt(shared)
			if pFresh := pkt(load()); !slices.Equal(pShared, pFresh) {
				t.Errorf("packet after fluid on one set: rows differ from packet on a fresh set")
			}
			if fFresh := fluid(load()); !slices.Equal(fFresh, first) {
				t.Errorf("fluid on a fresh set: rows differ from fluid on the shared one")
			}
			if again := fluid(shared); !slices.Equal(again, first) {
				t.Errorf("fluid after packet on one set: rows differ from fluid's first run")
			}
			if again := pkt(shared); !slices.Equal(again, pShared) {
				t.Errorf("packet twice on one set: the second run's rows differ from the first's")
			}
			if !slices.Equal(records(), before) {
				t.Errorf("the runs wrote into the set's flow records")
			}
			var end int64
			for _, r := range pShared {
				if r.EndNs <= 0 || r.StartNs < 0 {
					t.Fatalf("packet: flow %d unfinished (start %d, end %d ns)", r.FlowID, r.StartNs, r.EndNs)
				}
				end = max(end, r.EndNs)
			}
			// Both backends moved the same 4 MiB AllReduce: a ring over
			// 2 DP ranks at 400 Gbps takes at least 2(n-1)/n * S / B.
			if low := int64(4<<20) * 8 / 400; end < low {
				t.Errorf("packet ended at %d ns, before the %d ns the bytes need", end, low)
			}
		})
	}
}
