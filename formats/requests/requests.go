// Package requests writes and reads the per-request trace of an inference
// serving run, fabricsim.requests/v1 (simccl-serve's output): one row per
// request with the times it passed each stage, as Parquet. It also writes
// the subset of Vidur's request_metrics.csv columns (SimAI 1.5+'s serving
// output) that the row determines. formats/requests.md is the normative
// description.
package requests

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/formats/internal/pqcheck"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// SchemaName is the value of the fabricsim.schema metadata key.
const SchemaName = "fabricsim.requests/v1"

// Metadata keys.
const (
	KeySchema   = "fabricsim.schema"
	KeyModel    = "fabricsim.model"
	KeyParams   = "fabricsim.params"
	KeyTopology = "fabricsim.topology"
)

// Row is one request. Times are ns since the run's start (the trace's
// first arrival at 0 for a trace from a file). Row is also the Parquet row
// handed to parquet-go: field order and tags give the columns.
type Row struct {
	RequestID      int64 `parquet:"request_id"`
	PrefillReplica int32 `parquet:"prefill_replica"` // index among the prefill replicas
	DecodeReplica  int32 `parquet:"decode_replica"`  // index among the decode replicas
	PrefillTokens  int64 `parquet:"prefill_tokens"`
	DecodeTokens   int64 `parquet:"decode_tokens"` // output tokens, the first from prefill
	KVBytes        int64 `parquet:"kv_bytes"`      // moved prefill -> decode (0 when decode_tokens is 1)
	ArrivalNs      int64 `parquet:"arrival_ns"`
	ScheduledNs    int64 `parquet:"scheduled_ns"`    // its prefill batch started
	PrefillDoneNs  int64 `parquet:"prefill_done_ns"` // first token out
	KVStartNs      int64 `parquet:"kv_start_ns"`
	KVEndNs        int64 `parquet:"kv_end_ns"`       // the last KV byte arrived at the decode replica
	DecodeStartNs  int64 `parquet:"decode_start_ns"` // its first decode iteration started
	CompletedNs    int64 `parquet:"completed_ns"`    // its last token out
	TTFTNs         int64 `parquet:"ttft_ns"`         // prefill_done - arrival
	TPOTNs         int64 `parquet:"tpot_ns"`         // (completed - prefill_done) / (decode_tokens - 1); 0 for 1 token
	E2ENs          int64 `parquet:"e2e_ns"`          // completed - arrival
}

// Meta is the file-level metadata.
type Meta struct {
	Model    string             // the model's name
	Params   map[string]any     // the run's settings (JSON)
	Topology trace.TopologyMeta // as the flow trace's
}

// Column names in the schema's order.
var columns = []string{"request_id", "prefill_replica", "decode_replica", "prefill_tokens", "decode_tokens", "kv_bytes",
	"arrival_ns", "scheduled_ns", "prefill_done_ns", "kv_start_ns", "kv_end_ns", "decode_start_ns", "completed_ns",
	"ttft_ns", "tpot_ns", "e2e_ns"}

// ColumnNames returns the names of the columns in order.
func ColumnNames() []string { return append([]string(nil), columns...) }

// Check returns why r cannot be a row, naming the column, or nil: ids and
// replicas from 0, at least one token each way, bytes from 0, and the
// stage times in order (arrival <= scheduled <= prefill_done <= kv_start
// <= kv_end <= decode_start <= completed) with the three latencies as
// their definitions give.
func Check(r *Row) error {
	switch {
	case r.RequestID < 0:
		return fmt.Errorf("column %q is %d; ids start at 0", "request_id", r.RequestID)
	case r.PrefillReplica < 0:
		return fmt.Errorf("column %q is %d; replicas start at 0", "prefill_replica", r.PrefillReplica)
	case r.DecodeReplica < 0:
		return fmt.Errorf("column %q is %d; replicas start at 0", "decode_replica", r.DecodeReplica)
	case r.PrefillTokens < 1:
		return fmt.Errorf("column %q is %d; a request has at least 1 prompt token", "prefill_tokens", r.PrefillTokens)
	case r.DecodeTokens < 1:
		return fmt.Errorf("column %q is %d; a request has at least 1 output token", "decode_tokens", r.DecodeTokens)
	case r.KVBytes < 0:
		return fmt.Errorf("column %q is %d; bytes cannot be negative", "kv_bytes", r.KVBytes)
	case r.ArrivalNs < 0:
		return fmt.Errorf("column %q is %d; times start at 0", "arrival_ns", r.ArrivalNs)
	}
	times := []int64{r.ArrivalNs, r.ScheduledNs, r.PrefillDoneNs, r.KVStartNs, r.KVEndNs, r.DecodeStartNs, r.CompletedNs}
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			return fmt.Errorf("column %q is %d, before %q %d", columns[6+i], times[i], columns[5+i], times[i-1])
		}
	}
	tpot := int64(0)
	if r.DecodeTokens > 1 {
		tpot = (r.CompletedNs - r.PrefillDoneNs) / (r.DecodeTokens - 1)
	}
	switch {
	case r.TTFTNs != r.PrefillDoneNs-r.ArrivalNs:
		return fmt.Errorf("column %q is %d, want prefill_done_ns - arrival_ns = %d", "ttft_ns", r.TTFTNs, r.PrefillDoneNs-r.ArrivalNs)
	case r.TPOTNs != tpot:
		return fmt.Errorf("column %q is %d, want (completed_ns - prefill_done_ns) / (decode_tokens - 1) = %d", "tpot_ns", r.TPOTNs, tpot)
	case r.E2ENs != r.CompletedNs-r.ArrivalNs:
		return fmt.Errorf("column %q is %d, want completed_ns - arrival_ns = %d", "e2e_ns", r.E2ENs, r.CompletedNs-r.ArrivalNs)
	}
	return nil
}

// Fill sets the three latencies of r from its times.
func Fill(r *Row) {
	r.TTFTNs = r.PrefillDoneNs - r.ArrivalNs
	r.E2ENs = r.CompletedNs - r.ArrivalNs
	r.TPOTNs = 0
	if r.DecodeTokens > 1 {
		r.TPOTNs = (r.CompletedNs - r.PrefillDoneNs) / (r.DecodeTokens - 1)
	}
}

// Write writes rows with metadata m as Parquet (zstd) to w. It refuses a
// row that Check refuses, naming its index.
func Write(w io.Writer, m Meta, rows []Row) error {
	for i := range rows {
		if err := Check(&rows[i]); err != nil {
			return fmt.Errorf("requests: row %d: %v", i, err)
		}
	}
	params, err := json.Marshal(m.Params)
	if err != nil {
		return fmt.Errorf("requests: params: %v", err)
	}
	topo, err := json.Marshal(m.Topology)
	if err != nil {
		return fmt.Errorf("requests: topology: %v", err)
	}
	pw := parquet.NewGenericWriter[Row](w,
		parquet.NewSchema("schema", parquet.SchemaOf(Row{})),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.KeyValueMetadata(KeySchema, SchemaName),
		parquet.KeyValueMetadata(KeyModel, m.Model),
		parquet.KeyValueMetadata(KeyParams, string(params)),
		parquet.KeyValueMetadata(KeyTopology, string(topo)))
	return pqcheck.WriteRows(pw, rows)
}

// MetricsColumns are the request_metrics.csv columns WriteMetricsCSV
// writes: Vidur's names (vidur/metrics/constants.py), in seconds.
var MetricsColumns = []string{"Request Id", "request_num_prefill_tokens", "request_num_decode_tokens", "request_num_tokens",
	"request_e2e_time", "request_e2e_time_normalized", "request_scheduling_delay", "prefill_e2e_time",
	"decode_time_execution_plus_preemption_normalized"}

// WriteMetricsCSV writes rows in Vidur's request_metrics.csv layout (the
// columns the row determines; times in seconds): e2e, e2e per output
// token, scheduling delay (scheduled - arrival), prefill_e2e_time (TTFT)
// and, as Vidur normalises it, the time spent decoding (decode start to
// completion: no preemption here) per output token.
func WriteMetricsCSV(w io.Writer, rows []Row) error {
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	if err := cw.Write(MetricsColumns); err != nil {
		return err
	}
	s := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'g', -1, 64) }
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range rows {
		rec := []string{i64(r.RequestID), i64(r.PrefillTokens), i64(r.DecodeTokens), i64(r.PrefillTokens + r.DecodeTokens),
			s(r.E2ENs), strconv.FormatFloat(float64(r.E2ENs)/1e9/float64(r.DecodeTokens), 'g', -1, 64),
			s(r.ScheduledNs - r.ArrivalNs), s(r.TTFTNs),
			strconv.FormatFloat(float64(r.CompletedNs-r.DecodeStartNs)/1e9/float64(r.DecodeTokens), 'g', -1, 64)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// maxRows bounds the rows a file may announce (0: none); the fuzz target
// sets it.
var maxRows int64

// Read reads a requests file (path, or stdin for "-").
func Read(path string) (Meta, []Row, error) {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		path = "<stdin>"
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Meta{}, nil, fmt.Errorf("%s: %v", path, err)
	}
	return Decode(path, data)
}

// Decode reads a requests file held in data, called name in errors: the
// metadata, every column of the schema with its type, and every row
// through Check.
func Decode(name string, data []byte) (Meta, []Row, error) {
	if len(data) < 4 || string(data[:4]) != "PAR1" {
		return Meta{}, nil, fmt.Errorf("%s: not a Parquet file (simccl-serve writes fabricsim.requests/v1 as Parquet)", name)
	}
	ra := bytes.NewReader(data)
	size := int64(len(data))
	f, err := pqcheck.Guard(func() (*parquet.File, error) {
		if err := pqcheck.Footer(ra, size); err != nil {
			return nil, err
		}
		return parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	})
	if err != nil {
		return Meta{}, nil, fmt.Errorf("%s: not a readable Parquet file: %s", name, errtext.OneLine(err))
	}
	var m Meta
	if s, ok := f.Lookup(KeySchema); !ok || s != SchemaName {
		return Meta{}, nil, fmt.Errorf("%s: metadata %s is %q, want %q (a simccl-serve output)", name, KeySchema, errtext.Clip(s), SchemaName)
	}
	m.Model, _ = f.Lookup(KeyModel)
	if p, ok := f.Lookup(KeyParams); ok && p != "" {
		if err := json.Unmarshal([]byte(p), &m.Params); err != nil {
			return Meta{}, nil, fmt.Errorf("%s: metadata %s is not a JSON object: %q", name, KeyParams, errtext.Clip(p))
		}
	}
	if t, ok := f.Lookup(KeyTopology); ok && t != "" {
		if err := json.Unmarshal([]byte(t), &m.Topology); err != nil {
			return Meta{}, nil, fmt.Errorf("%s: metadata %s is not a JSON object: %q", name, KeyTopology, errtext.Clip(t))
		}
	}
	rows, err := pqcheck.Guard(func() ([]Row, error) { return readRows(name, ra, size, f) })
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+": ") {
			err = fmt.Errorf("%s: %s", name, errtext.OneLine(err))
		}
		return Meta{}, nil, err
	}
	return m, rows, nil
}

func readRows(name string, ra io.ReaderAt, size int64, f *parquet.File) ([]Row, error) {
	have := map[string]parquet.Field{}
	for _, fl := range f.Schema().Fields() {
		if _, dup := have[fl.Name()]; dup {
			return nil, fmt.Errorf("%s: duplicate column %q", name, fl.Name())
		}
		have[fl.Name()] = fl
	}
	var leaves []int
	for _, wf := range parquet.SchemaOf(Row{}).Fields() {
		fl, ok := have[wf.Name()]
		if !ok {
			return nil, fmt.Errorf("%s: missing column %q", name, wf.Name())
		}
		if !fl.Leaf() || fl.Type().Kind() != wf.Type().Kind() || !fl.Required() {
			return nil, fmt.Errorf("%s: column %q is not a REQUIRED %s", name, wf.Name(), wf.Type().Kind())
		}
		leaf, _ := f.Schema().Lookup(wf.Name())
		leaves = append(leaves, leaf.ColumnIndex)
	}
	total, err := pqcheck.RowGroups(name, f, maxRows)
	if err != nil {
		return nil, err
	}
	if err := pqcheck.Pages(name, ra, size, f.Metadata(), leaves, "a requests file is ZSTD or UNCOMPRESSED (requests.md)"); err != nil {
		return nil, err
	}
	rows := make([]Row, 0, min(total, 1<<16))
	for g, rg := range f.RowGroups() {
		r := parquet.NewGenericRowGroupReader[Row](rg)
		buf := make([]Row, 1024)
		got := int64(0)
		for {
			n, err := r.Read(buf)
			for i := range buf[:n] {
				if cerr := Check(&buf[i]); cerr != nil {
					r.Close()
					return nil, fmt.Errorf("%s: row %d: %v", name, len(rows)+i, cerr)
				}
			}
			rows = append(rows, buf[:n]...)
			got += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("%s: row group %d: %s", name, g, errtext.OneLine(err))
			}
			if got > rg.NumRows() {
				break
			}
		}
		r.Close()
		if got != rg.NumRows() {
			return nil, fmt.Errorf("%s: row group %d has %d rows, its metadata says %d", name, g, got, rg.NumRows())
		}
	}
	return rows, nil
}
