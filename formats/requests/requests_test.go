package requests

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/trace"
)

func sampleRows() []Row {
	rows := []Row{
		{RequestID: 0, PrefillTokens: 100, DecodeTokens: 11, KVBytes: 1 << 20, ArrivalNs: 0, ScheduledNs: 5, PrefillDoneNs: 1000,
			KVStartNs: 1000, KVEndNs: 3000, DecodeStartNs: 3100, CompletedNs: 11000},
		{RequestID: 1, PrefillReplica: 1, DecodeReplica: 2, PrefillTokens: 7, DecodeTokens: 1, ArrivalNs: 50, ScheduledNs: 60,
			PrefillDoneNs: 900, KVStartNs: 900, KVEndNs: 900, DecodeStartNs: 900, CompletedNs: 900},
	}
	for i := range rows {
		Fill(&rows[i])
	}
	return rows
}

func TestRoundTrip(t *testing.T) {
	rows := sampleRows()
	if rows[0].TTFTNs != 1000 || rows[0].TPOTNs != 1000 || rows[0].E2ENs != 11000 || rows[1].TPOTNs != 0 {
		t.Fatalf("Fill: %+v", rows)
	}
	var buf bytes.Buffer
	meta := Meta{Model: "m", Params: map[string]any{"max_batch": 8.0}, Topology: trace.TopologyMeta{Family: "fat-tree", GPUs: 16, Hash: "h"}}
	if err := Write(&buf, meta, rows); err != nil {
		t.Fatal(err)
	}
	m, got, err := Decode("x.parquet", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if m.Model != "m" || m.Topology != meta.Topology || m.Params["max_batch"] != 8.0 {
		t.Errorf("meta %+v", m)
	}
	if len(got) != len(rows) || got[0] != rows[0] || got[1] != rows[1] {
		t.Errorf("rows %+v, want %+v", got, rows)
	}
	var csv bytes.Buffer
	if err := WriteMetricsCSV(&csv, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	// Request 0: e2e 11 us, 1 us a token of 11; scheduled 5 ns after
	// arrival; TTFT 1 us; decoding from 3.1 to 11 us, 7.9 us / 11 tokens.
	if lines[0] != strings.Join(MetricsColumns, ",") || lines[1] != "0,100,11,111,1.1e-05,1e-06,5e-09,1e-06,7.181818181818182e-07" {
		t.Errorf("request_metrics.csv:\n%s", csv.String())
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		edit func(*Row)
		want string
	}{
		{func(r *Row) { r.PrefillTokens = -1 }, `column "prefill_tokens" is -1`},
		{func(r *Row) { r.KVEndNs = 10 }, `column "kv_end_ns" is 10, before "kv_start_ns"`},
		{func(r *Row) { r.TTFTNs++ }, `column "ttft_ns"`},
		{func(r *Row) { r.TPOTNs = 7 }, `column "tpot_ns"`},
	} {
		r := sampleRows()[0]
		c.edit(&r)
		if err := Check(&r); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
		var buf bytes.Buffer
		if err := Write(&buf, Meta{}, []Row{r}); err == nil || !strings.HasPrefix(err.Error(), "requests: row 0: "+c.want) {
			t.Errorf("Write: got %v", err)
		}
	}
	if _, _, err := Decode("x", []byte("PAR1 not really")); err == nil || !strings.HasPrefix(err.Error(), "x: ") {
		t.Errorf("garbage: %v", err)
	}
	if _, _, err := Decode("x", []byte("a,b\n")); err == nil || !strings.Contains(err.Error(), "not a Parquet file") {
		t.Errorf("csv: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := Write(&buf, Meta{Model: "m"}, sampleRows()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PAR1"))
	maxRows = 1 << 12
	f.Fuzz(func(t *testing.T, data []byte) {
		_, rows, err := Decode("fuzz", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		for i := range rows {
			if err := Check(&rows[i]); err != nil {
				t.Fatalf("row %d accepted: %v", i, err)
			}
		}
	})
}
