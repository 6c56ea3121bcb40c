// Package handtraces holds small traces and link-load files made by hand,
// with numbers chosen so that every statistic fctstats reports can be
// worked out on paper: the tests of the reports (pkg/stats) and of their
// plots (pkg/plot) share them.
package handtraces

import (
	"bytes"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// Meta is the metadata the hand-made traces are written with.
var Meta = trace.Meta{Backend: "analytical-busbw", Params: map[string]any{"seed": 1},
	Topology: trace.TopologyMeta{Family: "test", GPUs: 4, Hash: "00"}}

// Encode writes rows as a trace in container c, with Meta.
func Encode(rows []trace.Row, c trace.Container) ([]byte, error) {
	return EncodeMeta(rows, c, Meta)
}

// EncodeMeta writes rows as a trace in container c with metadata m.
func EncodeMeta(rows []trace.Row, c trace.Container, m trace.Meta) ([]byte, error) {
	var b bytes.Buffer
	w, err := trace.NewWriter(&b, c, m)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Flows: three collectives and a compute delay, with numbers chosen so
// that every statistic is easy to compute by hand (pkg/stats TestAnalyze).
func Flows() []trace.Row {
	coll := func(id int64, op string, size int64, r trace.Row) trace.Row {
		r.CollectiveID, r.Op, r.CollSizeBytes, r.NRanks, r.GroupType, r.Algorithm = id, op, size, 4, "DP", "ring"
		if r.ConnType == "" {
			r.ConnType = "NET"
		}
		r.FctNs = r.EndNs - r.StartNs
		return r
	}
	var rows []trace.Row
	// Collective 0: AllReduce of 8e6 B over 4 ranks. Its launch delay
	// starts at 1000 and its last flow ends at 9000: time 8000 ns, algbw
	// 8e6/8000 = 1000 GB/s, busbw 1000 * 2*3/4 = 1500 GB/s.
	rows = append(rows, coll(0, "allreduce", 8e6, trace.Row{FlowID: 100, ConnType: stream.ConnDelay, StartNs: 1000, EndNs: 2000}))
	// Twenty 1000-byte flows with FCT 100, 200, ..., 2000 ns and ideal 100:
	// slowdowns 1..20.
	for i := int64(1); i <= 20; i++ {
		rows = append(rows, coll(0, "allreduce", 8e6, trace.Row{FlowID: i, Src: int32(i % 4), Dst: int32((i + 1) % 4),
			SizeBytes: 1000, StartNs: 2000, EndNs: 2000 + 100*i, IdealFctNs: 100}))
	}
	rows = append(rows, coll(0, "allreduce", 8e6, trace.Row{FlowID: 21, Src: 0, Dst: 1, SizeBytes: 1 << 20, StartNs: 5000, EndNs: 9000, IdealFctNs: 2000}))
	// Collectives 1 and 2: identical AllGathers of 4e6 B taking 2000 and
	// 6000 ns: algbw 2000 and 666.67, busbw *3/4. Together: mean 4000 ns,
	// algbw 1000, busbw 750.
	rows = append(rows, coll(1, "allgather", 4e6, trace.Row{FlowID: 30, Src: 1, Dst: 2, SizeBytes: 100, StartNs: 10000, EndNs: 12000, IdealFctNs: 1000}))
	rows = append(rows, coll(2, "allgather", 4e6, trace.Row{FlowID: 40, Src: 2, Dst: 3, SizeBytes: 100, StartNs: 20000, EndNs: 26000, IdealFctNs: 0})) // no ideal: no slowdown
	rows = append(rows, coll(2, "allgather", 4e6, trace.Row{FlowID: 41, Src: 2, Dst: 3, SizeBytes: 0, StartNs: 20000, EndNs: 20500, IdealFctNs: 500, ConnType: "P2P"}))
	// A compute phase: a delay node of no collective.
	rows = append(rows, trace.Row{FlowID: 50, CollectiveID: -1, ConnType: stream.ConnDelay, StartNs: 0, EndNs: 30000, FctNs: 30000, IdealFctNs: 30000})
	return rows
}

// Iteration is a hand-made iteration of two ranks (times in µs):
//
//	rank 0: fwd compute 0–100; TP AllReduce (fwd) 100–160; ig compute
//	        160–260; wg compute 260–300; the DP AllReduce (wg) runs
//	        260–400 and an EP AllToAll (ig) 300–350.
//	rank 1: fwd compute 0–80; the same TP AllReduce 100–160; ig compute
//	        160–200; the same DP AllReduce and EP AllToAll.
//
// By hand, rank 0: compute 240, exposed TP 60 (100–160), EP 50 (300–350:
// the ig AllToAll blocks, not the overlapping wg AllReduce), DP 50
// (350–400), bubble 0. Rank 1: compute 120, bubble 20 (80–100) + 60
// (200–260), TP 60, EP 50, DP 90 (260–300, 350–400). Both add up to the
// 400 µs iteration; rank 0 is critical.
func Iteration() []trace.Row {
	const us = 1000
	base := trace.Row{Layer: 0, LayerName: "attention_layer", Microbatch: 0, Stage: 0, Status: "ok"}
	comp := func(id int64, rank int32, phase string, a, b int64) trace.Row {
		r := base
		r.FlowID, r.CollectiveID, r.Src, r.Dst, r.StartNs, r.EndNs, r.FctNs, r.IdealFctNs = id, 100+id, rank, rank, a*us, b*us, (b-a)*us, (b-a)*us
		r.ConnType, r.Op, r.Phase, r.GroupType = stream.ConnDelay, stream.OpCompute, phase, ""
		return r
	}
	flow := func(id, coll int64, src, dst int32, op, group, phase string, size int64, a, b int64) trace.Row {
		r := base
		r.FlowID, r.CollectiveID, r.Src, r.Dst, r.StartNs, r.EndNs, r.FctNs, r.IdealFctNs = id, coll, src, dst, a*us, b*us, (b-a)*us, (b-a)*us
		r.ConnType, r.Op, r.GroupType, r.Phase, r.CollSizeBytes, r.NRanks, r.SizeBytes = "RING", op, group, phase, size, 2, size/2
		return r
	}
	return []trace.Row{
		comp(1, 0, "fwd", 0, 100), comp(2, 1, "fwd", 0, 80),
		flow(3, 10, 0, 1, "allreduce", "TP", "fwd", 1000*us, 100, 150), flow(4, 10, 1, 0, "allreduce", "TP", "fwd", 1000*us, 100, 160),
		comp(5, 0, "ig", 160, 260), comp(6, 1, "ig", 160, 200),
		comp(7, 0, "wg", 260, 300),
		flow(8, 11, 0, 1, "allreduce", "DP", "wg", 2000*us, 260, 400),
		flow(9, 12, 0, 1, "alltoall", "EP", "ig", 500*us, 300, 350),
	}
}

// TwoTierLinks is a 2-tier fabric's loads over a 1 ms run: GPUs 0-3 with
// 100 Gbps NICs, GPUs 0 and 1 under edge 4, 2 and 3 under edge 5, both
// edges under agg 6 by 100 Gbps uplinks (links 4 and 5). A DP AllReduce
// sends 1.25 MB up each NIC (100 us, 10%) and each edge sends its two
// GPUs' bytes, twice a NIC's, up and down its uplink (20%); GPU 0 adds an
// EP AllToAll of 0.625 MB up its NIC (5%) that goes on up edge 4's uplink
// doubled (1.25 MB, 10%).
func TwoTierLinks() (links.Meta, []links.Row) {
	m := links.Meta{Backend: "analytical-fluid", Routing: "ecmp", MakespanNs: 1_000_000, Granularity: "flow",
		Topology: trace.TopologyMeta{Family: "fat-tree", GPUs: 4, Hash: "ab"}}
	row := func(link, src, dst int32, sr, dr, kind, gt, op string, b int64) links.Row {
		busy := links.BusyNs(b, 100e9)
		return links.Row{Link: link, Src: src, Dst: dst, SrcRole: sr, DstRole: dr, Tier: links.Tier(sr, dr), Kind: kind,
			BWbps: 100e9, GroupType: gt, Op: op, Bytes: b, BusyNs: busy, Utilization: float64(busy) / float64(m.MakespanNs)}
	}
	var rows []links.Row
	for g := int32(0); g < 4; g++ {
		e := 4 + g/2
		rows = append(rows, row(g, g, e, "gpu", "edge", "nic", "DP", "allreduce", 1_250_000),
			row(g, e, g, "edge", "gpu", "nic", "DP", "allreduce", 1_250_000))
	}
	rows = append(rows, row(0, 0, 4, "gpu", "edge", "nic", "EP", "alltoall", 625_000))
	for e := int32(4); e < 6; e++ {
		rows = append(rows, row(e, e, 6, "edge", "agg", "fabric", "DP", "allreduce", 2_500_000),
			row(e, 6, e, "agg", "edge", "fabric", "DP", "allreduce", 2_500_000))
	}
	rows = append(rows, row(4, 4, 6, "edge", "agg", "fabric", "EP", "alltoall", 1_250_000))
	return m, rows
}
