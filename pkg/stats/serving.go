package stats

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/formats/requests"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// TableLatencies is the serving report's table: one row per latency.
const TableLatencies = "latencies"

// Serving is the report of an inference serving run (simccl-serve's
// per-request trace, formats/requests.md).
type Serving struct {
	Source        string  `json:"source"`
	Model         string  `json:"model"`
	Requests      int     `json:"requests"`
	PrefillTokens int64   `json:"prefill_tokens"`
	DecodeTokens  int64   `json:"decode_tokens"`
	KVBytes       int64   `json:"kv_bytes"`
	SpanNs        int64   `json:"span_ns"`             // first arrival to last completion
	OutputPerS    float64 `json:"output_tokens_per_s"` // decode_tokens / span
	TokensPerS    float64 `json:"tokens_per_s"`        // (prefill + decode tokens) / span
	RequestsPerS  float64 `json:"requests_per_s"`
	// KVShare is the KV transfers' share of the requests' time: the sum
	// of kv_end - kv_start over the sum of e2e.
	KVShare   Num          `json:"kv_share"`
	Latencies []LatencyRow `json:"latencies"`

	// Sorted values (ns) for the plots, and each request's arrival and
	// TTFT in arrival order.
	TTFT, TPOT, KV, E2E []int64 `json:"-"`
	Arrival, ArrTTFT    []int64 `json:"-"`
}

// LatencyRow is one latency's distribution over the requests, in ns
// (nearest-rank percentiles).
type LatencyRow struct {
	Metric string  `json:"metric"`
	Count  int     `json:"count"` // requests with this latency (TPOT: more than one output token; KV: a transfer)
	P50Ns  int64   `json:"p50_ns"`
	P90Ns  int64   `json:"p90_ns"`
	P99Ns  int64   `json:"p99_ns"`
	MaxNs  int64   `json:"max_ns"`
	MeanNs float64 `json:"mean_ns"`
}

// AnalyzeServing reports rows (read from source).
func AnalyzeServing(source string, m requests.Meta, rows []requests.Row) *Serving {
	s := &Serving{Source: source, Model: m.Model, Requests: len(rows)}
	if len(rows) == 0 {
		s.KVShare = Num(math.NaN())
		return s
	}
	first, last := rows[0].ArrivalNs, rows[0].CompletedNs
	var kvSum, e2eSum int64
	for _, r := range rows {
		first, last = min(first, r.ArrivalNs), max(last, r.CompletedNs)
		s.PrefillTokens += r.PrefillTokens
		s.DecodeTokens += r.DecodeTokens
		s.KVBytes += r.KVBytes
		s.TTFT = append(s.TTFT, r.TTFTNs)
		s.E2E = append(s.E2E, r.E2ENs)
		if r.DecodeTokens > 1 {
			s.TPOT = append(s.TPOT, r.TPOTNs)
		}
		if r.KVBytes > 0 {
			s.KV = append(s.KV, r.KVEndNs-r.KVStartNs)
		}
		kvSum += r.KVEndNs - r.KVStartNs
		e2eSum += r.E2ENs
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rows[a].ArrivalNs, rows[b].ArrivalNs) })
	for _, i := range order {
		s.Arrival = append(s.Arrival, rows[i].ArrivalNs-first)
		s.ArrTTFT = append(s.ArrTTFT, rows[i].TTFTNs)
	}
	s.SpanNs = last - first
	if s.SpanNs > 0 {
		sec := float64(s.SpanNs) / 1e9
		s.OutputPerS = float64(s.DecodeTokens) / sec
		s.TokensPerS = float64(s.PrefillTokens+s.DecodeTokens) / sec
		s.RequestsPerS = float64(len(rows)) / sec
	}
	s.KVShare = Num(math.NaN())
	if e2eSum > 0 {
		s.KVShare = Num(float64(kvSum) / float64(e2eSum))
	}
	for _, l := range []struct {
		name string
		v    []int64
	}{{"ttft", s.TTFT}, {"tpot", s.TPOT}, {"kv_transfer", s.KV}, {"e2e", s.E2E}} {
		slices.Sort(l.v)
		row := LatencyRow{Metric: l.name}
		if n := len(l.v); n > 0 {
			var sum float64
			for _, x := range l.v {
				sum += float64(x)
			}
			row = LatencyRow{Metric: l.name, Count: n, P50Ns: NearestRank(l.v, 50), P90Ns: NearestRank(l.v, 90), P99Ns: NearestRank(l.v, 99),
				MaxNs: l.v[n-1], MeanNs: sum / float64(n)}
		}
		s.Latencies = append(s.Latencies, row)
	}
	return s
}

// WriteText prints the report for people.
func (s *Serving) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, %d requests (%d prompt and %d output tokens) in %s\n", s.Source, s.Model, s.Requests,
		s.PrefillTokens, s.DecodeTokens, units.HumanDuration(s.SpanNs*1000))
	fmt.Fprintf(w, "throughput: %.1f output tokens/s, %.1f tokens/s in all, %.2f requests/s\n", s.OutputPerS, s.TokensPerS, s.RequestsPerS)
	if s.KVBytes == 0 {
		fmt.Fprintf(w, "KV transfer: none (colocated serving, or one output token each)\n")
	} else if s.KVShare.Valid() {
		fmt.Fprintf(w, "KV transfer: %s moved, %.2f%% of the requests' end-to-end time\n", units.HumanSize(s.KVBytes), 100*float64(s.KVShare))
	}
	fmt.Fprintf(w, "\n%-12s %10s %10s %10s %10s %10s\n", "latency", "p50", "p90", "p99", "max", "mean")
	for _, l := range s.Latencies {
		if l.Count == 0 {
			fmt.Fprintf(w, "%-12s %10s %10s %10s %10s %10s\n", l.Metric, "-", "-", "-", "-", "-")
			continue
		}
		d := func(ns int64) string { return units.HumanDuration(ns * 1000) }
		fmt.Fprintf(w, "%-12s %10s %10s %10s %10s %10s\n", l.Metric, d(l.P50Ns), d(l.P90Ns), d(l.P99Ns), d(l.MaxNs), d(int64(l.MeanNs)))
	}
}

// DataTable is the latencies table for CSV and Parquet (raw ns).
func (s *Serving) DataTable() *DataTable { return newDataTable(s.Source, s.Latencies) }
