package analytical

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/fuzzflows"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/linkload"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

const MiB = 1 << 20

func gen(t testing.TB, p topo.Params) *topo.Topology {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// encode writes a stream holding tp, groups, collectives and flows.
func encode(t testing.TB, tp *topo.Topology, groups []stream.Group, colls []stream.Collective, flows []stream.Flow) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	if tp != nil {
		w.Topology(tp)
	}
	for i := range groups {
		w.Group(&groups[i])
	}
	for i := range colls {
		w.Collective(&colls[i])
	}
	for i := range flows {
		w.Flow(&flows[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func read(data []byte) (*flowset.Set, error) {
	r, err := stream.NewReader(bytes.NewReader(data), "test")
	if err != nil {
		return nil, err
	}
	return flowset.Read(r)
}

func mustRead(t testing.TB, tp *topo.Topology, flows []stream.Flow) *flowset.Set {
	t.Helper()
	in, err := read(encode(t, tp, nil, nil, flows))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// simulate runs a model and returns the rows by flow id, checking that each
// flow appears exactly once.
func simulate(t testing.TB, in *flowset.Set, opt Options) (map[int64]trace.Row, Result) {
	t.Helper()
	rows := map[int64]trace.Row{}
	res, err := Run(in, opt, func(r *trace.Row) error {
		if _, dup := rows[r.FlowID]; dup {
			t.Fatalf("flow %d in the trace twice", r.FlowID)
		}
		rows[r.FlowID] = *r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != in.Flows() {
		t.Fatalf("%d rows for %d flows", len(rows), in.Flows())
	}
	var bytes int64
	for _, r := range rows {
		bytes += r.SizeBytes
	}
	if bytes != in.TotalBytes() || res.Bytes != bytes {
		t.Fatalf("trace holds %d bytes, input %d", bytes, in.TotalBytes())
	}
	return rows, res
}

func flow(id int64, src, dst int32, size int64, deps ...int64) stream.Flow {
	return stream.Flow{ID: id, Src: src, Dst: dst, Size: size, Deps: deps, ConnType: stream.ConnP2P}
}

// within asserts |got - want| <= tol picoseconds.
func within(t *testing.T, what string, got, want, tol des.Time) {
	t.Helper()
	if d := got - want; d < -tol || d > tol {
		t.Errorf("%s: %d ps, want %d ps (±%d)", what, got, want, tol)
	}
}

// Spectrum-X defaults: 400 Gbit/s NICs with 500 ns links, 2880 Gbit/s
// NVLink with 25 ns links. GPU 0 and GPU 8 are rail 0 of servers 0 and 1:
// GPU0 -> ASW(rail 0) -> GPU8, latency 2 x 500 ns = 1 us.
// 1 MiB = 8388608 bit takes 8388608 / 400e9 s = 20.97152 us.
const (
	oneMiBAt400G = 20_971_520 * des.Picosecond
	railLat      = 1000 * des.Nanosecond
)

func TestOneFlowIdlePath(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	for _, m := range []Model{Busbw, Fluid} {
		in := mustRead(t, tp, []stream.Flow{flow(0, 0, 8, MiB)})
		rows, res := simulate(t, in, Options{Model: m, Seed: 1})
		// end = latency + size/bandwidth = 1 us + 20.97152 us.
		if res.End != railLat+oneMiBAt400G {
			t.Errorf("%s: end %d ps, want %d", m, res.End, railLat+oneMiBAt400G)
		}
		if r := rows[0]; r.StartNs != 0 || r.EndNs != 21972 || r.FctNs != 21972 || r.IdealFctNs != 21972 {
			t.Errorf("%s: row %+v", m, r)
		}
	}
}

// Two flows on the same path get half the NIC each: both drain 1 MiB at
// 200 Gbit/s in 2 x 20.97152 us and arrive 1 us later. busbw shares the
// same way between flows of one collective and not at all between flows
// of different collectives.
func TestTwoFlowsShareALink(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	flows := []stream.Flow{flow(0, 0, 8, MiB), flow(1, 0, 8, MiB)}
	for _, m := range []Model{Fluid, Busbw} {
		rows, _ := simulate(t, mustRead(t, tp, flows), Options{Model: m})
		for id, r := range rows {
			if r.EndNs != (railLat+2*oneMiBAt400G).Ns() || r.IdealFctNs != (railLat+oneMiBAt400G).Ns() {
				t.Errorf("%s flow %d: %+v", m, id, r)
			}
		}
	}
	flows[1].Collective = 1
	rows, _ := simulate(t, mustRead(t, tp, flows), Options{Model: Busbw})
	for id, r := range rows {
		if r.EndNs != (railLat + oneMiBAt400G).Ns() {
			t.Errorf("busbw, two collectives, flow %d: %+v", id, r)
		}
	}
	rows, _ = simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	for id, r := range rows {
		if r.EndNs != (railLat + 2*oneMiBAt400G).Ns() {
			t.Errorf("fluid, two collectives, flow %d: %+v", id, r)
		}
	}
	// Different sources and paths meeting at one downlink also halve: GPU 1
	// (rail 1) reaches GPU 8 through ASW1, a PSW and ASW0 (2 us latency).
	flows = []stream.Flow{flow(0, 0, 8, MiB), flow(1, 1, 8, MiB)}
	rows, _ = simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	if rows[0].EndNs != (railLat+2*oneMiBAt400G).Ns() || rows[1].EndNs != (2*railLat+2*oneMiBAt400G).Ns() {
		t.Errorf("shared downlink: %+v %+v", rows[0], rows[1])
	}
}

// N -> 1 incast: N senders on rail 0 of N other servers all cross
// ASW0 -> GPU0, so each gets B/N and all finish at N*S*8/B + latency.
// Then a late joiner: flow 2 starts when flow 1 has half drained.
func TestIncast(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64})
	for _, n := range []int{2, 3, 7} {
		var flows []stream.Flow
		for k := 1; k <= n; k++ {
			flows = append(flows, flow(int64(k), int32(8*k), 0, MiB))
		}
		rows, res := simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
		want := railLat + des.Time(n)*oneMiBAt400G
		within(t, "incast end", res.End, want, 2)
		for id, r := range rows {
			if r.EndNs != want.Ns() {
				t.Errorf("incast %d: flow %d ends %d ns, want %d", n, id, r.EndNs, want.Ns())
			}
		}
	}
	// Flow 1 (2 MiB) alone drains 1 MiB by T = 20.97152 us, when the delay
	// node releases flow 2 (1 MiB). Both then drain at 200 Gbit/s: 1 MiB
	// each takes 2T, so both finish draining at 3T and arrive 1 us later.
	flows := []stream.Flow{flow(1, 8, 0, 2*MiB), {ID: 5, Src: 0, Dst: 0, DelayPs: int64(oneMiBAt400G), Deps: nil, ConnType: stream.ConnDelay}, flow(2, 16, 0, MiB, 5)}
	rows, _ := simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	if rows[1].EndNs != (railLat+3*oneMiBAt400G).Ns() || rows[2].EndNs != (railLat+3*oneMiBAt400G).Ns() || rows[2].StartNs != oneMiBAt400G.Ns() {
		t.Errorf("late joiner: %+v %+v", rows[1], rows[2])
	}
	if rows[5].SizeBytes != 0 || rows[5].EndNs != oneMiBAt400G.Ns() {
		t.Errorf("delay node: %+v", rows[5])
	}
}

// A delay node's ideal_fct_ns is its fct_ns (formats/trace.md), so its
// slowdown is exactly 1 even where rounding start and end to ns moves them
// apart: the second delay runs from 1499 ps (1 ns) to 2501 ps (3 ns), an
// fct of 2 ns for a 1002 ps delay.
func TestDelayIdealIsFCT(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	flows := []stream.Flow{
		{ID: 0, DelayPs: 1499, ConnType: stream.ConnDelay},
		{ID: 1, DelayPs: 1002, Deps: []int64{0}, ConnType: stream.ConnDelay},
	}
	for _, m := range []Model{Fluid, Busbw} {
		rows, _ := simulate(t, mustRead(t, tp, flows), Options{Model: m})
		if r := rows[1]; r.StartNs != 1 || r.EndNs != 3 || r.FctNs != 2 || r.IdealFctNs != 2 {
			t.Errorf("%s: delay row %+v", m, r)
		}
	}
}

// A 2:1 oversubscribed fat-tree (k=4: 4 GPUs and 2 uplinks of 400 Gbit/s
// per edge switch): the 4 GPUs of edge 0 each send 1 MiB to pod 1, each
// flow its own collective. busbw sees an idle 400 Gbit/s path per flow
// (3 us of latency + 20.97152 us); the fluid model squeezes 4 MiB through
// 800 Gbit/s of uplinks, so the last flow ends no earlier than 3 us + 2 x
// 20.97152 us, later if ECMP puts more flows on one uplink.
func TestOversubscribedUplink(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1})
	var flows []stream.Flow
	for g := int32(0); g < 4; g++ {
		f := flow(int64(g), g, 8+g, MiB)
		f.Collective = int64(g)
		flows = append(flows, f)
	}
	const lat = 3000 * des.Nanosecond
	_, rb := simulate(t, mustRead(t, tp, flows), Options{Model: Busbw})
	_, rf := simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	if rb.End != lat+oneMiBAt400G {
		t.Errorf("busbw ends at %v, want %v", rb.End, lat+oneMiBAt400G)
	}
	if rf.End < lat+2*oneMiBAt400G-2 {
		t.Errorf("fluid ends at %v, before the uplinks' capacity allows (%v)", rf.End, lat+2*oneMiBAt400G)
	}
}

// NVLS: GPU 0 sends 1 MiB to its NVSwitch (node 16 on a 16-GPU Spectrum-X:
// one 25 ns NVLink hop at 2880 Gbit/s, set), which multicasts to GPUs 1 and 2.
// A join (DELAY, size 0, no delay_ps, from GPU 3 to 4) ends with its last
// dep, with no path latency of its own.
func TestNVLSAndJoin(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, NVLinkBW: 2880e9})
	hop := 25*des.Nanosecond + des.TransferTime(MiB, 2880e9)
	flows := []stream.Flow{
		{ID: 0, Src: 0, Dst: 16, Size: MiB, ConnType: stream.ConnNVLS},
		{ID: 1, Src: 16, Dst: 1, Size: MiB, Deps: []int64{0}, ConnType: stream.ConnNVLS},
		{ID: 2, Src: 16, Dst: 2, Size: MiB, Deps: []int64{0}, ConnType: stream.ConnNVLS},
		{ID: 3, Src: 3, Dst: 4, Deps: []int64{1, 2}, ConnType: stream.ConnDelay},
	}
	for _, m := range []Model{Fluid, Busbw} {
		rows, res := simulate(t, mustRead(t, tp, flows), Options{Model: m})
		if res.End != 2*hop {
			t.Errorf("%s: ends at %v, want %v", m, res.End, 2*hop)
		}
		if r := rows[3]; r.StartNs != (2*hop).Ns() || r.FctNs != 0 || r.SizeBytes != 0 {
			t.Errorf("%s: join row %+v", m, r)
		}
	}
}

// ringAllReduce builds a ring AllReduce over ranks: 2(n-1) steps of size/n
// bytes; rank k's step-s send waits for its step s-1 receive and its own
// step s-1 send. Ids are step*n + k.
func ringAllReduce(ranks []int32, size int64) []stream.Flow {
	n := len(ranks)
	steps := 2 * (n - 1)
	flows := make([]stream.Flow, 0, steps*n)
	for s := 0; s < steps; s++ {
		for k := 0; k < n; k++ {
			f := stream.Flow{ID: int64(s*n + k), Src: ranks[k], Dst: ranks[(k+1)%n], Size: size / int64(n),
				Channel: 0, Chunk: int32(s), ChunkCount: int32(steps), ConnType: stream.ConnRing}
			if s > 0 {
				f.Deps = []int64{int64((s-1)*n + (k-1+n)%n), int64((s-1)*n + k)}
			}
			flows = append(flows, f)
		}
	}
	return flows
}

// Ring AllReduce over rail 0 of 16 servers (GPU 0, 8, ..., 120) on an idle
// rail-optimized fabric: every step crosses GPU -> ASW0 -> GPU with no
// sharing, so the collective takes 2(n-1)/n * S*8/B plus 2(n-1) step
// latencies of 1 us. S = 64 MiB, n = 16, B = 400 Gbit/s:
// 30/16 * 536870912 bit / 4e11 = 2516.5824 us, + 30 us = 2546.5824 us.
func TestRingAllReduceClosedForm(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 128})
	var ranks []int32
	for k := int32(0); k < 16; k++ {
		ranks = append(ranks, 8*k)
	}
	const S = 64 * MiB
	n := float64(len(ranks))
	closed := des.FromSeconds(2*(n-1)/n*S*8/400e9) + des.Time(2*(len(ranks)-1))*railLat
	if closed != 2_546_582_400*des.Picosecond {
		t.Fatalf("closed form %d ps", closed)
	}
	for _, m := range []Model{Fluid, Busbw} {
		_, res := simulate(t, mustRead(t, tp, ringAllReduce(ranks, S)), Options{Model: m, Seed: 1})
		within(t, m.String()+" ring", res.End, closed, 60) // exact but for ps rounding per step
	}
}

// With no link shared, fluid gives every flow its bottleneck rate and must
// equal busbw to the picosecond: 8 chains of flows, each chain on its own
// links (NVLink within a server, rail-local NIC paths across servers),
// with delay nodes and size-0 flows mixed in.
func TestFluidEqualsBusbwWithoutSharing(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32})
	pairs := [][2]int32{{0, 1}, {1, 2}, {2, 0}, {3, 11}, {11, 19}, {19, 27}, {27, 3}, {4, 12}}
	rng := rand.New(rand.NewPCG(1, 1))
	var flows []stream.Flow
	id := int64(0)
	for _, p := range pairs {
		prev := int64(-1)
		for k := 0; k < 25; k++ {
			f := flow(id, p[0], p[1], rng.Int64N(64*MiB))
			switch k % 7 {
			case 3:
				f = stream.Flow{ID: id, Src: p[0], Dst: p[0], DelayPs: rng.Int64N(5e6) + 1, ConnType: stream.ConnDelay}
			case 5:
				f.Size = 0
			}
			if prev >= 0 {
				f.Deps = []int64{prev}
			}
			flows = append(flows, f)
			prev = id
			id++
		}
	}
	a, ra := simulate(t, mustRead(t, tp, flows), Options{Model: Busbw})
	b, rb := simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	if ra.End != rb.End {
		t.Errorf("busbw ends at %d ps, fluid at %d ps", ra.End, rb.End)
	}
	for id, r := range a {
		if b[id] != r {
			t.Errorf("flow %d: busbw %+v, fluid %+v", id, r, b[id])
		}
	}
}

// referenceRates solves max-min fairness from scratch over every sending
// flow, for checking the incremental solver: a flow at rate r takes r*w of
// each link, w its share of the bytes there (1 unless sprayed).
func referenceRates(f *fluid) map[int32]float64 {
	rem := map[route.DirLink]float64{}
	cnt := map[route.DirLink]int{}
	wsum := map[route.DirLink]float64{}
	open := map[int32]bool{}
	for id := range f.slots {
		s := &f.slots[id]
		if !s.live {
			continue
		}
		open[int32(id)] = true
		for k, l := range s.path {
			rem[l] = f.cap[l]
			cnt[l]++
			wsum[l] += float64(s.weight(k))
		}
	}
	rates := map[int32]float64{}
	for len(open) > 0 {
		var best route.DirLink
		share := math.Inf(1)
		for l, n := range cnt {
			if n > 0 && rem[l]/wsum[l] < share {
				best, share = l, rem[l]/wsum[l]
			}
		}
		for id := range open {
			s := &f.slots[id]
			on := false
			for _, l := range s.path {
				on = on || l == best
			}
			if !on {
				continue
			}
			rates[id] = share
			delete(open, id)
			for k, l := range s.path {
				rem[l] -= share * float64(s.weight(k))
				wsum[l] -= float64(s.weight(k))
				cnt[l]--
			}
		}
	}
	return rates
}

// The incremental solver against a from-scratch solution after every
// update, on random traffic with random DAG deps (so flows start at many
// different times) through fabrics where links are shared unevenly: a
// Spectrum-X with only 2 spines (ECMP collides, uplinks oversubscribed
// 8:2), a 2:1 oversubscribed fat-tree, and a DCN+ dual-ToR fabric. Some
// flows have equal sizes so that rates tie. Under each routing: spray and
// adaptive flows weigh their links by their share of the bytes.
func TestFluidMatchesFullRecompute(t *testing.T) {
	for _, routing := range []route.Policy{route.ECMP, route.Spray, route.Adaptive} {
		testFluidMatchesFullRecompute(t, routing)
	}
}

func testFluidMatchesFullRecompute(t *testing.T, routing route.Policy) {
	for _, p := range []topo.Params{
		{Family: topo.SpectrumX, GPUs: 64, PSWs: 2, NICsPerASW: 4},
		{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1},
		{Family: topo.DCNDualToR, GPUs: 64, NICsPerASW: 16, PSWs: 2},
	} {
		tp := gen(t, p)
		g := int32(tp.GPUs)
		rng := rand.New(rand.NewPCG(9, uint64(g)))
		var flows []stream.Flow
		for id := int64(0); id < 500; id++ {
			size := 1 + rng.Int64N(8*MiB)
			if id%3 == 0 {
				size = MiB
			}
			src, dst := rng.Int32N(g), rng.Int32N(g-1)
			if dst >= src { // never to itself
				dst++
			}
			f := flow(id, src, dst, size)
			for k := rng.IntN(3); k > 0 && id > 0; k-- {
				f.Deps = append(f.Deps, rng.Int64N(id))
			}
			flows = append(flows, f)
		}
		checks, worst := 0, 0.0
		verify := func(f *fluid) {
			checks++
			for id, want := range referenceRates(f) {
				got := f.hot[id].rate
				if d := math.Abs(got-want) / want; d > worst {
					worst = d
				}
			}
		}
		simulate(t, mustRead(t, tp, flows), Options{Model: Fluid, Routing: routing, verify: verify})
		if worst > 1e-9 {
			t.Errorf("%s, %s: incremental rates differ from a full recompute by %.3g (relative) over %d updates", p.Family, routing, worst, checks)
		}
		if checks < 100 {
			t.Errorf("%s, %s: only %d updates checked", p.Family, routing, checks)
		}
	}
}

// Same input and seed, same trace; the seed moves flows between ECMP paths.
func TestDeterminism(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, PSWs: 4})
	var ranks []int32
	for k := int32(0); k < 128; k++ {
		ranks = append(ranks, k)
	}
	data := encode(t, tp, nil, nil, ringAllReduce(ranks, 16*MiB))
	var ends []des.Time
	var seqs [][]trace.Row
	for _, seed := range []uint64{1, 1, 2} {
		in, err := read(data)
		if err != nil {
			t.Fatal(err)
		}
		var seq []trace.Row
		res, err := Run(in, Options{Model: Fluid, Seed: seed}, func(r *trace.Row) error { seq = append(seq, *r); return nil })
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, res.End)
		seqs = append(seqs, seq)
		if seed == 1 && len(ends) == 2 {
			t.Logf("ring over 128 GPUs, 4 spines: %v (%d recomputes)", res.End, res.Recomputes)
		}
	}
	if ends[0] != ends[1] {
		t.Errorf("same seed: %v then %v", ends[0], ends[1])
	}
	if !slices.Equal(seqs[0], seqs[1]) {
		t.Error("same seed, different trace rows (or row order)")
	}
	// Another seed hashes the ring's flows onto other spines: some flow
	// shares its links differently, so some row changes (the makespan may
	// not: the slowest link can stay as loaded).
	if slices.Equal(seqs[0], seqs[2]) {
		t.Error("seeds 1 and 2 give the same trace rows: the seed does not reach ECMP")
	}
}

// Op, algorithm, group and the flows/v2 columns come from the collective and
// group records.
func TestCollectiveColumns(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	f := flow(0, 0, 8, MiB)
	f.Collective = 7
	g := flow(1, 0, 1, MiB)
	g.Collective = -1
	data := encode(t, tp, []stream.Group{{ID: 3, Type: "DP", Ranks: []int32{0, 8}}},
		[]stream.Collective{{ID: 7, Op: "allreduce", Size: 2 * MiB, Group: 3, Algorithm: "ring", Protocol: "ll128", PredictedPs: 12_345_500,
			Layer: 4, LayerName: "attention", Phase: "fwd", Microbatch: 2, Stage: 1}}, []stream.Flow{f, g})
	in, err := read(data)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := simulate(t, in, Options{})
	if r := rows[0]; r.Op != "allreduce" || r.Algorithm != "ring" || r.GroupType != "DP" || r.NRanks != 2 || r.CollSizeBytes != 2*MiB || r.CollectiveID != 7 {
		t.Errorf("row %+v", r)
	}
	// flows/v2 columns: the collective's position and NCCL model, the protocol spelled
	// as NCCL does, PredictedPs rounded to ns.
	if r := rows[0]; r.Layer != 4 || r.LayerName != "attention" || r.Phase != "fwd" || r.Microbatch != 2 || r.Stage != 1 ||
		r.Protocol != "LL128" || r.PredictedNs != 12_346 || r.Status != "ok" {
		t.Errorf("row v2 columns %+v", r)
	}
	if r := rows[1]; r.Op != "" || r.NRanks != 0 || r.CollectiveID != -1 || r.Layer != -1 || r.Microbatch != -1 || r.Stage != -1 ||
		r.LayerName != "" || r.Phase != "" || r.Protocol != "" || r.PredictedNs != 0 || r.Status != "ok" {
		t.Errorf("row without collective %+v", r)
	}
}

func TestBadInput(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	for _, c := range []struct {
		name  string
		tp    *topo.Topology
		flows []stream.Flow
		want  string
	}{
		{"no topology", nil, nil, "no topology record"},
		{"flow before topology", nil, []stream.Flow{flow(0, 0, 1, 1)}, "record 1 (flow): flow before the topology"},
		{"src a leaf switch", tp, []stream.Flow{flow(0, 0, 1, 1), flow(1, 18, 1, 1)}, "record 3 (flow), field src: flow 1: 18 is not a GPU (0..15) or an NVSwitch"},
		{"dst out of range", tp, []stream.Flow{flow(0, 0, 1000, 1)}, "record 2 (flow), field dst: flow 0: 1000 is not a GPU"},
		{"dst negative", tp, []stream.Flow{flow(0, 0, -1, 1)}, "record 2 (flow), field dst"},
		{"missing dep", tp, []stream.Flow{flow(0, 0, 1, 1), flow(1, 0, 1, 1, 0, 9)}, "record 3 (flow), field deps: flow 1: dep 9 names no flow"},
		{"cycle", tp, []stream.Flow{flow(0, 0, 1, 1, 1), flow(1, 0, 1, 1, 0)}, "record 2 (flow), field deps: flow 0: never becomes ready: dependency cycle 0 waits on 1 waits on 0"},
		{"duplicate id", tp, []stream.Flow{flow(4, 0, 1, 1), flow(4, 0, 1, 1)}, "record 3 (flow), field id: flow 4: duplicate id"},
		{"delay with size", tp, []stream.Flow{{ID: 0, Size: 5, DelayPs: 7, ConnType: stream.ConnDelay}}, "field size: flow 0: a DELAY node has size 0"},
	} {
		_, err := read(encode(t, c.tp, nil, nil, c.flows))
		var se *stream.Error
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		} else if c.tp != nil && !errors.As(err, &se) {
			t.Errorf("%s: %T is not a *stream.Error", c.name, err)
		}
	}
	// Unreachable pair: found when the flow is released.
	cut := *tp
	cut.Links = nil
	for _, l := range tp.Links {
		if l.Kind != stream.LinkFabric {
			cut.Links = append(cut.Links, l)
		}
	}
	in := mustRead(t, &cut, []stream.Flow{flow(0, 0, 8, 1), flow(1, 0, 9, 1, 0)})
	_, err := Run(in, Options{}, func(*trace.Row) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "record 3 (flow), field dst: flow 1: no path from GPU 0 to GPU 9") {
		t.Errorf("unreachable: %v", err)
	}
}

// BenchmarkFluidRandom: flows between random GPUs of a 1024-GPU
// Spectrum-X, all released at once, one big connected component that
// shrinks as flows finish. equal: 20k flows of 1 MiB, as in an AllToAll;
// equal sizes finish fastest-first, so each finish re-solves only the few
// flows at or above its rate. spread: 10k flows of sizes spread
// log-uniformly over 4 KiB..256 MiB, the solver's hard case: most finishes
// perturb a large share of the flows.
func BenchmarkFluidRandom(b *testing.B) {
	tp := gen(b, topo.Params{Family: topo.SpectrumX, GPUs: 1024})
	for _, c := range []struct {
		name string
		n    int64
		size func(*rand.Rand) int64
	}{
		{"equal", 20000, func(*rand.Rand) int64 { return MiB }},
		{"spread", 10000, func(rng *rand.Rand) int64 { return int64(4096 * math.Pow(2, 16*rng.Float64())) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			var flows []stream.Flow
			for id := int64(0); id < c.n; id++ {
				// A transfer's ends differ (the reader refuses one to itself).
				src, dst := rng.Int32N(1024), rng.Int32N(1023)
				if dst >= src {
					dst++
				}
				flows = append(flows, flow(id, src, dst, c.size(rng)))
			}
			benchFluid(b, tp, flows)
		})
	}
}

// BenchmarkFluidRing: ring AllReduce over 256 GPUs of Spectrum-X (NVLink
// and NIC steps), the shape of the 1024-GPU end-to-end benchmark.
func BenchmarkFluidRing(b *testing.B) {
	tp := gen(b, topo.Params{Family: topo.SpectrumX, GPUs: 256})
	var ranks []int32
	for k := int32(0); k < 256; k++ {
		ranks = append(ranks, k)
	}
	flows := ringAllReduce(ranks, 256*MiB)
	data := encode(b, tp, nil, nil, flows)
	in, err := read(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var events uint64
	for i := 0; i < b.N; i++ {
		res, err := Run(in, Options{Model: Fluid, Seed: 1}, func(*trace.Row) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		events += res.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(len(flows))*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

// FuzzRun builds flows from arbitrary bytes (ends that may not be GPUs,
// deps that may be missing or cyclic, sizes and delays up to 2^62, link
// latencies near the end of time) and runs both models: bad input must be
// an error, never a panic, and a run that succeeds conserves every flow.
func FuzzRun(f *testing.F) {
	f.Add([]byte{0, 0, 1, 9, 1, 0, 0, 0, 0, 9, 1, 2, 1, 1, 0, 0})
	f.Add([]byte{1, 1, 3, 4, 3, 2, 3, 1, 2, 5, 4, 0, 2, 3, 0, 1, 0, 0})
	f.Add([]byte{2, 0, 16, 1, 1, 0, 0, 0, 0, 16, 1, 0, 4, 0, 0, 0})
	tops := []*topo.Topology{
		gen(f, topo.Params{Family: topo.SpectrumX, GPUs: 16}),
		gen(f, topo.Params{Family: topo.DCNDualToR, GPUs: 16}),
		gen(f, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 2}),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := fuzzflows.Set(tops, data, fuzzflows.Options{Sizes: []int64{0, 1, 4096, MiB, 64 * MiB, 1 << 62}, MaxFlows: 64})
		if err != nil {
			return
		}
		for _, m := range []Model{Fluid, Busbw} {
			n, bytes := 0, int64(0)
			res, err := Run(in, Options{Model: m, Seed: 3}, func(r *trace.Row) error {
				n++
				bytes += r.SizeBytes
				if r.EndNs < r.StartNs {
					t.Fatalf("%s: flow %d ends before it starts: %+v", m, r.FlowID, r)
				}
				return nil
			})
			if err != nil {
				continue
			}
			if n != in.Flows() || bytes != in.TotalBytes() || res.Flows != n {
				t.Fatalf("%s: %d rows, %d bytes for %d flows, %d bytes", m, n, bytes, in.Flows(), in.TotalBytes())
			}
		}
	})
}

// A transfer's step latency (delay_ps) includes its path's propagation:
// the bytes start max(0, step - path latency) after release. GPU 0 to GPU
// 8 is a 1 us rail path, 1 MiB takes 20.97152 us at 400 Gbit/s.
func TestStepLatency(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	withLat := func(f stream.Flow, ps int64) stream.Flow { f.DelayPs = ps; return f }
	for _, m := range []Model{Busbw, Fluid} {
		for _, c := range []struct {
			name string
			lat  des.Time
			want des.Time
		}{
			{"step above path", 14 * des.Microsecond, 14*des.Microsecond + oneMiBAt400G},
			{"step below path", 300 * des.Nanosecond, railLat + oneMiBAt400G},
			{"no step latency", 0, railLat + oneMiBAt400G},
		} {
			rows, res := simulate(t, mustRead(t, tp, []stream.Flow{withLat(flow(0, 0, 8, MiB), int64(c.lat))}), Options{Model: m})
			if res.End != c.want || rows[0].IdealFctNs != c.want.Ns() || rows[0].FctNs != c.want.Ns() {
				t.Errorf("%s, %s: ends %d ps (ideal %d ns), want %d ps", m, c.name, res.End, rows[0].IdealFctNs, c.want)
			}
		}
		// A chain of small transfers: each waits for the one before, so
		// the chain takes the sum of max(step, path) + its bytes' time.
		// 8 bytes at 400 Gbit/s is 160 ps.
		var flows []stream.Flow
		var want des.Time
		for k := int64(0); k < 6; k++ {
			src, dst := int32(0), int32(8)
			if k%2 == 1 {
				src, dst = 8, 0
			}
			lat := des.Time(k+1) * des.Microsecond // 1..6 us; the first equals the path latency
			f := withLat(flow(k, src, dst, 8), int64(lat))
			if k > 0 {
				f.Deps = []int64{k - 1}
			}
			flows = append(flows, f)
			want += max(lat, railLat) + 160
		}
		// A zero-byte transfer with a step latency, and a rank's local
		// work (a DELAY node).
		local := withLat(flow(7, 3, 3, 0, 6), 2_000_000)
		local.ConnType = stream.ConnDelay
		flows = append(flows, withLat(flow(6, 0, 8, 0, 5), 5_000_000), local)
		want += 5*des.Microsecond + 2*des.Microsecond
		_, res := simulate(t, mustRead(t, tp, flows), Options{Model: m})
		within(t, m.String()+" chain", res.End, want, 0)
	}
}

// busbw shares links among one collective's flows only: 8 GPUs on rail 0
// of 8 servers send 1 MiB each to GPU 0. As one collective the ASW0->GPU0
// link is split 8 ways, all end at 8 x 20.97152 us + 1 us, as under fluid;
// as 8 collectives each runs alone.
func TestBusbwSharesWithinACollective(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 128})
	var flows []stream.Flow
	for k := int64(1); k <= 8; k++ {
		flows = append(flows, flow(k, int32(8*k), 0, MiB))
	}
	for _, m := range []Model{Busbw, Fluid} {
		_, res := simulate(t, mustRead(t, tp, flows), Options{Model: m})
		within(t, m.String()+", one collective", res.End, railLat+8*oneMiBAt400G, 8)
	}
	for i := range flows {
		flows[i].Collective = int64(i)
	}
	_, res := simulate(t, mustRead(t, tp, flows), Options{Model: Busbw})
	within(t, "busbw, 8 collectives", res.End, railLat+oneMiBAt400G, 0)
	_, res = simulate(t, mustRead(t, tp, flows), Options{Model: Fluid})
	within(t, "fluid, 8 collectives", res.End, railLat+8*oneMiBAt400G, 8)
}

// No link carries more than its capacity: after every rate update the
// rates of the flows crossing each link (each collective's copy of it
// under busbw) sum to at most its bandwidth, and the bytes delivered over
// a whole ring AllReduce on one server fit the GPUs' NVLinks: its bus
// bandwidth, 2(n-1)/n x size / time, is at most the NVLink rate. The same
// ring's 24 channels under busbw used to report about 24 times that.
func TestNoLinkOverCapacity(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100"})
	ranks := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	var flows []stream.Flow
	const size, channels = 64 * MiB, 24
	id := int64(0)
	for ch := 0; ch < channels; ch++ {
		prev := make([]int64, 8)
		for s := 0; s < 14; s++ {
			cur := make([]int64, 8)
			for i := range ranks {
				f := flow(id, ranks[i], ranks[(i+1)%8], size/channels/8)
				if s > 0 {
					f.Deps = []int64{prev[(i+7)%8]}
				}
				cur[i] = id
				id++
				flows = append(flows, f)
			}
			prev = cur
		}
	}
	// Plus two more collectives in flight at once on server 1 for fluid.
	for k := int64(0); k < 2; k++ {
		for g := int32(8); g < 16; g++ {
			f := flow(id, g, 8+(g-8+1+int32(k))%8, 32*MiB)
			f.Collective = 1 + k
			flows = append(flows, f)
			id++
		}
	}
	for _, m := range []Model{Busbw, Fluid} {
		checks := 0
		verify := func(f *fluid) {
			checks++
			load := map[route.DirLink]float64{}
			for i := range f.slots {
				if s := &f.slots[i]; s.live {
					for _, l := range s.path {
						load[l] += f.hot[i].rate
					}
				}
			}
			for l, r := range load {
				if r > f.cap[l]*(1+1e-9) {
					t.Fatalf("%s: link %d carries %.6g bit/s, capacity %.6g", m, l, r, f.cap[l])
				}
			}
		}
		rows, _ := simulate(t, mustRead(t, tp, flows), Options{Model: m, verify: verify})
		if checks == 0 {
			t.Fatalf("%s: no update checked", m)
		}
		var end int64
		for _, r := range rows {
			if r.CollectiveID == 0 {
				end = max(end, r.EndNs)
			}
		}
		nvlink := 12 * 20e9 // bytes/s: the A100's usable NVLink
		busbw := 2 * 7.0 / 8 * size / (float64(end) * 1e-9)
		if busbw > nvlink*(1+1e-6) {
			t.Errorf("%s: ring busbw %.1f GB/s beyond the %.0f GB/s NVLink", m, busbw/1e9, nvlink/1e9)
		}
	}
}

// Link loads conserve bytes: whatever the routing, a flow leaves as many
// bytes on each tier of the fabric as it has bytes, because every equal-cost
// path crosses the same tiers. The per-tier totals are summed by hand from
// each flow's path (route.Path) and compared with the run's; under spray and
// adaptive the bytes are spread over many links, yet the tiers' totals hold.
func TestLinkLoadsConserveBytes(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1})
	g := int32(tp.GPUs)
	rng := rand.New(rand.NewPCG(3, 4))
	var flows []stream.Flow
	for id := int64(0); id < 200; id++ {
		src, dst := rng.Int32N(g), rng.Int32N(g-1)
		if dst >= src {
			dst++
		}
		flows = append(flows, flow(id, src, dst, 1+rng.Int64N(4*MiB)))
	}
	r, err := route.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	tier := func(l route.DirLink) string {
		return tp.Nodes[r.From(l)].Role + "-" + tp.Nodes[r.To(l)].Role
	}
	want := map[string]float64{}
	for _, f := range flows {
		p, err := r.Path(f.Src, f.Dst, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p {
			want[tier(l)] += float64(f.Size)
		}
	}
	for _, routing := range []route.Policy{route.ECMP, route.Spray, route.Adaptive} {
		for _, m := range []Model{Fluid, Busbw} {
			_, res := simulate(t, mustRead(t, tp, flows), Options{Model: m, Routing: routing, LinkLoads: true})
			got := map[string]float64{}
			up := map[int32][]float64{} // per edge switch: its uplinks' bytes
			res.Loads.Each(func(_ linkload.Class, l route.DirLink, b float64) {
				got[tier(l)] += b
				if tier(l) == topo.RoleEdge+"-"+topo.RoleAgg {
					up[r.From(l)] = append(up[r.From(l)], b)
				}
			})
			for k, w := range want {
				if math.Abs(got[k]-w) > 1e-6*w {
					t.Errorf("%s %s: tier %s carries %.0f bytes, the flows' paths %.0f", routing, m, k, got[k], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: tiers %v, want %v", routing, m, got, want)
			}
			// k = 4: an edge switch has two uplinks, and spraying puts half
			// of every flow leaving it on each.
			if routing == route.Spray {
				for e, b := range up {
					if len(b) != 2 || math.Abs(b[0]-b[1]) > 1e-9*b[0] {
						t.Errorf("spray %s: edge switch %d's uplinks carry %v bytes", m, e, b)
					}
				}
			}
		}
	}
}

// Adaptive routing steers a flow from the links its own collective loads
// per bit/s, under busbw too, where each workload step has private copies
// of the links. On a k=4 fat-tree whose GPU 0 edge switch has one uplink at
// half rate, flow A (GPU 0 to 2) starts on idle links and splits evenly;
// flow B (GPU 1 to 3), released once a tiny transfer has landed, finds A's
// half on the slow uplink twice as heavy per bit/s and sends all its bytes
// over the fast one. So the slow uplink carries A's half only.
func TestAdaptiveAvoidsLoadedLinks(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	var edge int32 = -1
	for _, l := range tp.Links {
		if l.Kind == stream.LinkNIC && (l.A == 0 || l.B == 0) {
			edge = l.A + l.B // the other end of GPU 0's NIC link
		}
	}
	slow := -1
	for i, l := range tp.Links {
		if l.Kind == stream.LinkFabric && (l.A == edge || l.B == edge) {
			tp.Links[i].BWbps /= 2
			slow = i
			break
		}
	}
	if edge < 0 || slow < 0 {
		t.Fatal("no edge switch uplink found for GPU 0")
	}
	up := route.Directed(tp, int32(slow), edge)
	const size = 64 * MiB
	flows := []stream.Flow{flow(0, 0, 2, size), flow(1, 0, 1, 1024), flow(2, 1, 3, size, 1)}
	for _, m := range []Model{Fluid, Busbw} {
		_, res := simulate(t, mustRead(t, tp, flows), Options{Model: m, Routing: route.Adaptive, LinkLoads: true})
		var got float64
		res.Loads.Each(func(_ linkload.Class, l route.DirLink, b float64) {
			if l == up {
				got += b
			}
		})
		if math.Abs(got-size/2) > 1 {
			t.Errorf("%s: the slow uplink carries %.0f bytes, want A's half, %d", m, got, size/2)
		}
	}
}

// With --ecmp-key connection every transfer of one connection (GPU pair
// and channel) takes the path its queue pair hashed to: 16 transfers
// from GPU 0 to a GPU in another pod, one after the other, load one of
// GPU 0's edge switch's two uplinks with all their bytes. Hashed per
// transfer, as by default, they spread over both (each transfer draws on
// its own: all 16 on one uplink would be a 1 in 2^15 draw). The trace's
// params name the key only when it is not the default.
func TestECMPKeyConnection(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	var edge int32 = -1
	for _, l := range tp.Links {
		if l.Kind == stream.LinkNIC && (l.A == 0 || l.B == 0) {
			edge = l.A + l.B
		}
	}
	ups := map[route.DirLink]bool{}
	for i, l := range tp.Links {
		if l.Kind == stream.LinkFabric && (l.A == edge || l.B == edge) {
			if d := route.Directed(tp, int32(i), edge); tp.Nodes[l.A+l.B-edge].Kind != stream.NodeGPU {
				ups[d] = true
			}
		}
	}
	if len(ups) != 2 {
		t.Fatalf("GPU 0's edge switch has %d uplinks, want 2", len(ups))
	}
	const size = MiB
	dst := int32(tp.GPUs - 1) // another pod
	var flows []stream.Flow
	for i := int64(0); i < 16; i++ {
		f := flow(i, 0, dst, size)
		if i > 0 {
			f.Deps = []int64{i - 1}
		}
		flows = append(flows, f)
	}
	in := mustRead(t, tp, flows)
	for _, key := range []route.HashKey{route.KeyTransfer, route.KeyConnection} {
		_, res := simulate(t, in, Options{Model: Fluid, ECMPKey: key, LinkLoads: true})
		per := map[route.DirLink]float64{}
		res.Loads.Each(func(_ linkload.Class, l route.DirLink, b float64) {
			if ups[l] {
				per[l] += b
			}
		})
		used, total := 0, 0.0
		for _, b := range per {
			if b > 0 {
				used++
			}
			total += b
		}
		if total != 16*size {
			t.Errorf("%s: the uplinks carry %.0f bytes, want %d", key, total, 16*size)
		}
		if want := map[route.HashKey]int{route.KeyTransfer: 2, route.KeyConnection: 1}[key]; used != want {
			t.Errorf("%s: %d uplinks carry the connection's bytes, want %d", key, used, want)
		}
		_, named := Meta(in, Options{Model: Fluid, ECMPKey: key}).Params["ecmp_key"]
		if named != (key == route.KeyConnection) {
			t.Errorf("%s: params name ecmp_key: %v", key, named)
		}
	}
}

// fillBound against hand-solved saturation levels of one 100 bit/s link:
// the level x at which the flows slower than x (limited elsewhere, rates
// kept) plus x for every other flow, new ones (rate 0) included, fill it.
// cap / flows, the classic bound, is 25 in the first three cases.
func TestFillBound(t *testing.T) {
	for _, c := range []struct {
		rates []float64 // 0: added this instant
		want  float64
	}{
		{[]float64{10, 20, 50, 0}, 35},   // 10 + 20 + x + x = 100
		{[]float64{10, 30, 40, 0}, 30},   // 10 + 30 + 30 + 30: ties at the level stay free
		{[]float64{10, 26, 0, 0}, 32},    // two rounds: 10 fixed (30), then 26 too (32)
		{[]float64{50, 50, 0}, 100 / 3.}, // nobody below the classic bound
	} {
		f := &fluid{cap: []float64{100}, flows: make([][]entry, 1)}
		for id, r := range c.rates {
			f.hot = append(f.hot, slotHot{rate: r})
			f.flows[0] = append(f.flows[0], entry{id: int32(id), w: 1})
		}
		inf := math.Inf(1)
		if got := f.fillBound(0, inf); math.Abs(got-c.want) > 1e-12*c.want {
			t.Errorf("rates %v: fillBound %.15g, want %.15g", c.rates, got, c.want)
		}
		// A theta at or under the level stays.
		if got := f.fillBound(0, c.want); got != c.want {
			t.Errorf("rates %v: fillBound at theta %g gave %g", c.rates, c.want, got)
		}
		// Weighted entries (a sprayed flow came) keep the classic bound.
		f.wsum = []float64{float64(len(c.rates))}
		if got, want := f.fillBound(0, inf), 100/float64(len(c.rates)); got != want {
			t.Errorf("rates %v, weighted: fillBound %g, want the classic %g", c.rates, got, want)
		}
	}
}

// BenchmarkFluidSmallMessages: case A of issue 36 (newuser4's F8) at a
// fortieth of its length: 4 KiB messages between random hosts of a k=8
// fat-tree of 128 one-GPU servers, each host starting one every 164 ns
// on average (Poisson; half of its 400 Gbit/s NIC) for 5 us: about 3.9k
// flows, most in flight alone or with a few others, every start and end a
// solve over a component the fabric's uplinks connect.
func BenchmarkFluidSmallMessages(b *testing.B) {
	tp := gen(b, topo.Params{Family: topo.FatTree, K: 8, GPUs: 128, GPUsPerServer: 1})
	const msg, hosts, span = 4096, 128, 5e6 // bytes, hosts, ps
	gap := msg * 8 / (0.5 * 400e9) * 1e12   // mean ps between a host's messages
	rng := rand.New(rand.NewPCG(36, 1))
	var flows []stream.Flow
	for src := int32(0); src < hosts; src++ {
		for at := rng.ExpFloat64() * gap; at < span; at += rng.ExpFloat64() * gap {
			dst := rng.Int32N(hosts - 1)
			if dst >= src {
				dst++
			}
			f := flow(int64(len(flows)), src, dst, msg)
			f.DelayPs = int64(at)
			flows = append(flows, f)
		}
	}
	benchFluid(b, tp, flows)
}

// benchFluid times reading and running flows on tp under fluid, and
// reports the solves and flows a second.
func benchFluid(b *testing.B, tp *topo.Topology, flows []stream.Flow) {
	data := encode(b, tp, nil, nil, flows)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := read(data)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(in, Options{Model: Fluid, Seed: 1}, func(*trace.Row) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Recomputes), "recomputes")
	}
	b.ReportMetric(float64(len(flows))*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}
