package stats

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/requests"
)

// Four requests by hand over 10 s (first arrival 0, last completion
// 10 s): 40 output tokens in all, 4 a second; KV transfers of 1, 2, 3 and
// 0 ms over e2e times summing to 12 s, a share of 6 ms / 12 s = 0.0005.
func TestAnalyzeServing(t *testing.T) {
	ms := int64(1_000_000)
	mk := func(id, arr, done, kv, completed, decode int64) requests.Row {
		r := requests.Row{RequestID: id, PrefillTokens: 100, DecodeTokens: decode, KVBytes: 1, ArrivalNs: arr, ScheduledNs: arr,
			PrefillDoneNs: done, KVStartNs: done, KVEndNs: done + kv, DecodeStartNs: done + kv, CompletedNs: completed}
		if decode == 1 {
			r.KVBytes, r.KVEndNs, r.DecodeStartNs = 0, done, done
		}
		requests.Fill(&r)
		return r
	}
	rows := []requests.Row{
		mk(0, 0, 10*ms, 1*ms, 3000*ms, 10),
		mk(1, 1000*ms, 1020*ms, 2*ms, 4000*ms, 10),
		mk(2, 2000*ms, 2030*ms, 3*ms, 7000*ms, 19),
		mk(3, 9000*ms, 10000*ms, 0, 10000*ms, 1),
	}
	s := AnalyzeServing("x", requests.Meta{Model: "m"}, rows)
	if s.SpanNs != 10000*ms || s.DecodeTokens != 40 || s.OutputPerS != 4 || s.RequestsPerS != 0.4 {
		t.Errorf("span %d, decode %d, %g tokens/s, %g requests/s", s.SpanNs, s.DecodeTokens, s.OutputPerS, s.RequestsPerS)
	}
	if float64(s.KVShare) != 6.0/12000 {
		t.Errorf("KV share %g, want %g", float64(s.KVShare), 6.0/12000)
	}
	// TTFT 10, 20, 30, 1000 ms: nearest-rank p50 is the 2nd, p90 and p99 the 4th.
	want := LatencyRow{Metric: "ttft", Count: 4, P50Ns: 20 * ms, P90Ns: 1000 * ms, P99Ns: 1000 * ms, MaxNs: 1000 * ms, MeanNs: 265 * float64(ms)}
	if s.Latencies[0] != want {
		t.Errorf("ttft %+v, want %+v", s.Latencies[0], want)
	}
	// TPOT of the three multi-token requests: 2990/9, 2980/9, 4970/18 ms.
	if tp := s.Latencies[1]; tp.MaxNs != 2990*ms/9 || len(s.TPOT) != 3 {
		t.Errorf("tpot %+v", tp)
	}
	if kv := s.Latencies[2]; kv.P50Ns != 2*ms || kv.MaxNs != 3*ms {
		t.Errorf("kv %+v", kv)
	}
	var b bytes.Buffer
	s.WriteText(&b)
	if !strings.Contains(b.String(), "4.0 output tokens/s") || !strings.Contains(b.String(), "0.05% of the requests' end-to-end time") {
		t.Errorf("text:\n%s", b.String())
	}
}
