// Package trace writes and reads the per-flow trace fabricsim.flows/v3 in
// three containers: Arrow IPC stream, Arrow IPC file and Parquet.
// formats/trace.md is the normative description of the format.
//
// Writers always write v3 (26 columns). Readers also accept
// fabricsim.flows/v2 (the first 25 columns: Job reads back empty) and
// fabricsim.flows/v1 (the first 17 columns): its rows read back with
// Layer, Microbatch and Stage -1, Status "ok" and the other v2 fields
// zero or empty; Meta.Schema tells which version a trace had.
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
)

// SchemaName is the value of the fabricsim.schema metadata key that
// writers write.
const SchemaName = "fabricsim.flows/v3"

// SchemaV2 and SchemaV1 are the previous versions, still accepted by
// readers.
const (
	SchemaV2 = "fabricsim.flows/v2"
	SchemaV1 = "fabricsim.flows/v1"
)

// Statuses of a flow: delivered, or cut off by a failed link (LINK_DOWN
// left it no path; it ends when that is found, with what it delivered).
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Schema metadata keys, identical in Arrow schema metadata and Parquet
// key/value metadata.
const (
	KeySchema   = "fabricsim.schema"
	KeyBackend  = "fabricsim.backend"
	KeyParams   = "fabricsim.params"
	KeyTopology = "fabricsim.topology"
	KeyRows     = "fabricsim.rows"
	// A run that stopped before every flow finished says so: complete
	// "false" and the count of flows that have no row.
	KeyComplete   = "fabricsim.complete"
	KeyUnfinished = "fabricsim.unfinished_flows"
	// Which collectives and jobs of a partial run the stop cut, with
	// their flows finished and in all (Cut).
	KeyCut = "fabricsim.cut"
	// What the stream's producers left out (its note records).
	KeyNotes = "fabricsim.notes"
	// A run that approximated what it simulates (flowsim-analytical
	// --approx-lockstep) says how, in words; absent for a run without
	// approximations beyond its model's.
	KeyApproximate = "fabricsim.approximate"
)

// Backends allowed in Meta.Backend.
var Backends = []string{"analytical-busbw", "analytical-fluid", "packet", "phy"}

// Row is one flow. Times are nanoseconds, sizes bytes.
//
// Row is also the Parquet row the writer hands to parquet-go: field order
// and tags give the column order and names. Go int32/int64 map to
// INT32/INT64 with a signed INTEGER annotation, Go string to BYTE_ARRAY
// with the STRING annotation; strings are dictionary-encoded.
type Row struct {
	FlowID        int64  `parquet:"flow_id"`
	CollectiveID  int64  `parquet:"collective_id"`
	Src           int32  `parquet:"src"`
	Dst           int32  `parquet:"dst"`
	SizeBytes     int64  `parquet:"size_bytes"`
	StartNs       int64  `parquet:"start_ns"`
	EndNs         int64  `parquet:"end_ns"`
	FctNs         int64  `parquet:"fct_ns"`
	IdealFctNs    int64  `parquet:"ideal_fct_ns"`
	ConnType      string `parquet:"conn_type,dict"`
	Channel       int32  `parquet:"channel"`
	Chunk         int32  `parquet:"chunk"`
	Op            string `parquet:"op,dict"`
	Algorithm     string `parquet:"algorithm,dict"`
	GroupType     string `parquet:"group_type,dict"`
	CollSizeBytes int64  `parquet:"coll_size_bytes"`
	NRanks        int32  `parquet:"nranks"`

	// Columns added in fabricsim.flows/v2 (see formats/trace.md). Reading a
	// v1 trace fills them with Layer, Microbatch, Stage = -1, Status "ok"
	// and the rest empty.
	Layer       int32  `parquet:"layer"`           // workload layer (line order), -1 outside layers
	LayerName   string `parquet:"layer_name,dict"` // the layer's name in the workload
	Phase       string `parquet:"phase,dict"`      // fwd, ig, wg, pp; "" outside a training iteration
	Microbatch  int32  `parquet:"microbatch"`      // -1 for iteration-level work
	Stage       int32  `parquet:"stage"`           // pipeline stage of the collective's ranks, -1 if none
	Protocol    string `parquet:"protocol,dict"`   // NCCL protocol of the collective (LL, LL128, Simple)
	PredictedNs int64  `parquet:"predicted_ns"`    // the collective's time in NCCL's model, 0 if unknown
	Status      string `parquet:"status,dict"`     // ok (delivered); other values name a failure

	// Added in fabricsim.flows/v3: the job the flow belongs to (the
	// stream's job records, simccl-decompose --job and --merge); "" in a
	// stream without jobs and in v1 and v2 traces.
	Job string `parquet:"job,dict"`
}

// Meta is the trace-level metadata stored in the schema metadata.
//
// Params is stored as a JSON object. On read, numbers come back as
// json.Number so that int64 values such as seeds keep every digit and
// re-marshal to the same text.
//
// Schema is the fabricsim.schema value the trace was read with
// (SchemaName or SchemaV1); writers ignore it and always write SchemaName.
type Meta struct {
	Schema   string
	Backend  string
	Params   map[string]any
	Topology TopologyMeta
	// Rows, when positive, is the number of rows the writer announces
	// (fabricsim.rows): a stream is written before its end is known, so a
	// reader that does not check the end-of-stream marker can still tell
	// a trace cut at a batch boundary. Writers and our reader check it.
	Rows int64
	// Unfinished, when positive, is the number of flows of the workload
	// that never finished (and have no row): the run stopped early, and
	// the trace is partial (fabricsim.complete=false). 0 is a whole run,
	// as is a trace written before these keys existed.
	Unfinished int64
	// Cut, in a partial trace, says which collectives and jobs the stop
	// cut (fabricsim.cut); nil in a whole trace, and in a partial one
	// written before the key existed.
	Cut *Cut
	// Notes are what the stream's producers said they left out or
	// assumed (the stream's note records, formats/stream.md), carried so
	// that a report of the run says so (fabricsim.notes, a JSON array of
	// strings; absent when there are none).
	Notes []string
	// Approximate, when not empty, says what the run approximated
	// (fabricsim.approximate): readers print it beside its results.
	Approximate string
}

// Partial reports whether the trace is of a run that stopped early.
func (m Meta) Partial() bool { return m.Unfinished > 0 }

// Cut lists what a stopped run left unfinished, per group of flows the
// stream names: the collectives with at least one row and at least one
// flow without (a collective absent from the list has all its flows or
// none), a count of those with none, and every job with a flow without a
// row. Flows count delay nodes, as fabricsim.unfinished_flows does.
type Cut struct {
	Collectives []CutCollective `json:"collectives"`
	// NotStarted counts the collectives (not compute phases) of which no
	// flow finished: they have no row.
	NotStarted int64    `json:"collectives_not_started"`
	Jobs       []CutJob `json:"jobs,omitempty"`
}

// CutCollective is a collective a stop cut: Finished of its Flows flows
// have a row (0 < Finished < Flows).
type CutCollective struct {
	ID       int64 `json:"collective_id"`
	Finished int64 `json:"finished"`
	Flows    int64 `json:"flows"`
}

// CutJob is a job with unfinished flows: Finished of its Flows have a
// row (0 <= Finished < Flows).
type CutJob struct {
	Job      string `json:"job"`
	Finished int64  `json:"finished"`
	Flows    int64  `json:"flows"`
}

// TopologyMeta identifies the fabric a trace was produced on.
type TopologyMeta struct {
	Family string `json:"family"`
	GPUs   int    `json:"gpus"`
	Hash   string `json:"hash"`
}

// Container is the on-disk encoding of a trace.
type Container int

// The three containers.
const (
	ArrowStream Container = iota // Arrow IPC streaming format (.arrows, stdout)
	ArrowFile                    // Arrow IPC file format, "ARROW1" magic (.arrow)
	Parquet                      // Parquet, "PAR1" magic (.parquet, .pq)
)

func (c Container) String() string {
	switch c {
	case ArrowStream:
		return "arrow-stream"
	case ArrowFile:
		return "arrow-file"
	case Parquet:
		return "parquet"
	}
	return fmt.Sprintf("Container(%d)", int(c))
}

// ContainerForPath picks the container from a file name's extension:
// .arrow is an Arrow IPC file, .arrows an Arrow IPC stream, .parquet and
// .pq Parquet; a path with no extension that is a device or a pipe
// (/dev/null, where a run's summary line is all one wants; /dev/stdout,
// /dev/fd/N, a FIFO: outfile writes them in place) takes the stream, the
// one a pipe can carry. Any other extension is an error naming the path.
func ContainerForPath(path string) (Container, error) {
	if filepath.Ext(path) == "" {
		if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
			return ArrowStream, nil
		}
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".arrow":
		return ArrowFile, nil
	case ".arrows":
		return ArrowStream, nil
	case ".parquet", ".pq":
		return Parquet, nil
	}
	return 0, fmt.Errorf("%s: unknown trace extension %q (want .parquet, .pq, .arrow or .arrows)", path, filepath.Ext(path))
}

// colKind is the logical type of a column; its Arrow and Parquet physical
// types follow from it.
type colKind uint8

const (
	kindInt64 colKind = iota
	kindInt32
	kindString
)

func (k colKind) String() string {
	switch k {
	case kindInt64:
		return "int64"
	case kindInt32:
		return "int32"
	}
	return "dictionary<int32, utf8>"
}

// Column slots inside a columnar batch, per kind.
const (
	i64FlowID = iota
	i64CollectiveID
	i64SizeBytes
	i64StartNs
	i64EndNs
	i64FctNs
	i64IdealFctNs
	i64CollSizeBytes
	i64PredictedNs
	numI64
)

const (
	i32Src = iota
	i32Dst
	i32Channel
	i32Chunk
	i32NRanks
	i32Layer
	i32Microbatch
	i32Stage
	numI32
)

const (
	strConnType = iota
	strOp
	strAlgorithm
	strGroupType
	strLayerName
	strPhase
	strProtocol
	strStatus
	strJob
	numStr
)

// column describes one schema column; slot indexes the per-kind arrays.
type column struct {
	name string
	kind colKind
	slot int
}

// Column positions in the schema's normative order. The v1 columns come
// first: a v1 trace has exactly columns [0, numV1Columns).
const (
	colFlowID = iota
	colCollectiveID
	colSrc
	colDst
	colSizeBytes
	colStartNs
	colEndNs
	colFctNs
	colIdealFctNs
	colConnType
	colChannel
	colChunk
	colOp
	colAlgorithm
	colGroupType
	colCollSizeBytes
	colNRanks
	colLayer
	colLayerName
	colPhase
	colMicrobatch
	colStage
	colProtocol
	colPredictedNs
	colStatus
	colJob
	numColumns

	numV1Columns = colLayer
	numV2Columns = colJob
)

// columns is the schema in its normative order.
var columns = [numColumns]column{
	{"flow_id", kindInt64, i64FlowID},
	{"collective_id", kindInt64, i64CollectiveID},
	{"src", kindInt32, i32Src},
	{"dst", kindInt32, i32Dst},
	{"size_bytes", kindInt64, i64SizeBytes},
	{"start_ns", kindInt64, i64StartNs},
	{"end_ns", kindInt64, i64EndNs},
	{"fct_ns", kindInt64, i64FctNs},
	{"ideal_fct_ns", kindInt64, i64IdealFctNs},
	{"conn_type", kindString, strConnType},
	{"channel", kindInt32, i32Channel},
	{"chunk", kindInt32, i32Chunk},
	{"op", kindString, strOp},
	{"algorithm", kindString, strAlgorithm},
	{"group_type", kindString, strGroupType},
	{"coll_size_bytes", kindInt64, i64CollSizeBytes},
	{"nranks", kindInt32, i32NRanks},
	// fabricsim.flows/v2
	{"layer", kindInt32, i32Layer},
	{"layer_name", kindString, strLayerName},
	{"phase", kindString, strPhase},
	{"microbatch", kindInt32, i32Microbatch},
	{"stage", kindInt32, i32Stage},
	{"protocol", kindString, strProtocol},
	{"predicted_ns", kindInt64, i64PredictedNs},
	{"status", kindString, strStatus},
	// fabricsim.flows/v3
	{"job", kindString, strJob},
}

// numColumnsOf returns how many of columns a trace of the given schema
// version has.
func numColumnsOf(schema string) int {
	switch schema {
	case SchemaV1:
		return numV1Columns
	case SchemaV2:
		return numV2Columns
	}
	return numColumns
}

// setV1Defaults fills the fields v1 traces do not have.
func setV1Defaults(r *Row) {
	r.Layer, r.LayerName, r.Phase = -1, "", ""
	r.Microbatch, r.Stage = -1, -1
	r.Protocol, r.PredictedNs, r.Status, r.Job = "", 0, StatusOK, ""
}

// ColumnNames returns the names of the v3 schema's columns in order.
func ColumnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}

// batchRows is the number of rows per Arrow record batch.
const batchRows = 64 << 10

// colBatch holds up to batchRows rows column by column; string columns are
// indices into dictionaries kept by the owner.
type colBatch struct {
	n   int
	i64 [numI64][]int64
	i32 [numI32][]int32
	str [numStr][]int32
}

func newColBatch(capacity int) *colBatch {
	b := &colBatch{}
	for i := range b.i64 {
		b.i64[i] = make([]int64, capacity)
	}
	for i := range b.i32 {
		b.i32[i] = make([]int32, capacity)
	}
	for i := range b.str {
		b.str[i] = make([]int32, capacity)
	}
	return b
}

// put stores r at position i; string indices are resolved by the caller.
func (b *colBatch) put(i int, r *Row) {
	b.i64[i64FlowID][i] = r.FlowID
	b.i64[i64CollectiveID][i] = r.CollectiveID
	b.i64[i64SizeBytes][i] = r.SizeBytes
	b.i64[i64StartNs][i] = r.StartNs
	b.i64[i64EndNs][i] = r.EndNs
	b.i64[i64FctNs][i] = r.FctNs
	b.i64[i64IdealFctNs][i] = r.IdealFctNs
	b.i64[i64CollSizeBytes][i] = r.CollSizeBytes
	b.i64[i64PredictedNs][i] = r.PredictedNs
	b.i32[i32Src][i] = r.Src
	b.i32[i32Dst][i] = r.Dst
	b.i32[i32Channel][i] = r.Channel
	b.i32[i32Chunk][i] = r.Chunk
	b.i32[i32NRanks][i] = r.NRanks
	b.i32[i32Layer][i] = r.Layer
	b.i32[i32Microbatch][i] = r.Microbatch
	b.i32[i32Stage][i] = r.Stage
}

// rowStrings returns pointers to the string fields of r in slot order.
func rowStrings(r *Row) [numStr]*string {
	return [numStr]*string{&r.ConnType, &r.Op, &r.Algorithm, &r.GroupType, &r.LayerName, &r.Phase, &r.Protocol, &r.Status, &r.Job}
}

// encodeMeta renders m as the four metadata key/value pairs.
func encodeMeta(m Meta) (keys, values []string, err error) {
	if !validBackend(m.Backend) {
		return nil, nil, fmt.Errorf("trace: backend %q is not one of %s", m.Backend, strings.Join(Backends, ", "))
	}
	params := m.Params
	if params == nil {
		params = map[string]any{}
	}
	pj, err := json.Marshal(params) // map keys are sorted: deterministic bytes
	if err != nil {
		return nil, nil, fmt.Errorf("trace: params are not JSON-encodable: %w", err)
	}
	tj, err := json.Marshal(m.Topology)
	if err != nil {
		return nil, nil, fmt.Errorf("trace: topology: %w", err)
	}
	keys, values = []string{KeySchema, KeyBackend, KeyParams, KeyTopology}, []string{SchemaName, m.Backend, string(pj), string(tj)}
	if m.Rows < 0 {
		return nil, nil, fmt.Errorf("trace: %d rows announced", m.Rows)
	}
	if m.Rows > 0 {
		keys, values = append(keys, KeyRows), append(values, strconv.FormatInt(m.Rows, 10))
	}
	if m.Unfinished < 0 {
		return nil, nil, fmt.Errorf("trace: %d unfinished flows", m.Unfinished)
	}
	if m.Unfinished > 0 {
		keys = append(keys, KeyComplete, KeyUnfinished)
		values = append(values, "false", strconv.FormatInt(m.Unfinished, 10))
	}
	if m.Cut != nil {
		if err := m.Cut.check(m.Unfinished); err != nil {
			return nil, nil, fmt.Errorf("trace: %s: %v", KeyCut, err)
		}
		cj, err := json.Marshal(m.Cut)
		if err != nil {
			return nil, nil, fmt.Errorf("trace: %s: %w", KeyCut, err)
		}
		keys, values = append(keys, KeyCut), append(values, string(cj))
	}
	if len(m.Notes) > 0 {
		nj, err := json.Marshal(m.Notes)
		if err != nil {
			return nil, nil, fmt.Errorf("trace: notes: %w", err)
		}
		keys, values = append(keys, KeyNotes), append(values, string(nj))
	}
	if m.Approximate != "" {
		keys, values = append(keys, KeyApproximate), append(values, m.Approximate)
	}
	return keys, values, nil
}

func validBackend(b string) bool {
	for _, v := range Backends {
		if b == v {
			return true
		}
	}
	return false
}

// decodeMeta validates and parses the metadata of a trace called name.
// lookup returns the value of a metadata key.
func decodeMeta(name string, lookup func(string) (string, bool)) (Meta, error) {
	var m Meta
	s, ok := lookup(KeySchema)
	if !ok {
		return m, fmt.Errorf("%s: not a %s trace: schema metadata has no %q key", name, SchemaName, KeySchema)
	}
	if s != SchemaName && s != SchemaV2 && s != SchemaV1 {
		return m, fmt.Errorf("%s: schema metadata %s is %q, want %q, %q or %q", name, KeySchema, errtext.Clip(s), SchemaName, SchemaV2, SchemaV1)
	}
	m.Schema = s
	if m.Backend, ok = lookup(KeyBackend); !ok {
		return m, fmt.Errorf("%s: schema metadata has no %q key", name, KeyBackend)
	}
	if !validBackend(m.Backend) {
		// Readers report per backend; an unknown name is a foreign or corrupt file.
		return m, fmt.Errorf("%s: schema metadata %s is %q, want one of %s", name, KeyBackend, errtext.Clip(m.Backend), strings.Join(Backends, ", "))
	}
	p, ok := lookup(KeyParams)
	if !ok {
		return m, fmt.Errorf("%s: schema metadata has no %q key", name, KeyParams)
	}
	dec := json.NewDecoder(strings.NewReader(p))
	dec.UseNumber()
	if err := dec.Decode(&m.Params); err != nil || dec.More() || m.Params == nil {
		return m, fmt.Errorf("%s: schema metadata %s is not a JSON object: %q", name, KeyParams, errtext.Clip(p))
	}
	t, ok := lookup(KeyTopology)
	if !ok {
		return m, fmt.Errorf("%s: schema metadata has no %q key", name, KeyTopology)
	}
	if err := json.Unmarshal([]byte(t), &m.Topology); err != nil || !bytes.HasPrefix(bytes.TrimSpace([]byte(t)), []byte("{")) {
		return m, fmt.Errorf("%s: schema metadata %s is not a JSON object with family, gpus, hash: %q", name, KeyTopology, errtext.Clip(t))
	}
	if v, ok := lookup(KeyRows); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return m, fmt.Errorf("%s: schema metadata %s is %q, want a positive row count", name, KeyRows, errtext.Clip(v))
		}
		m.Rows = n
	}
	if v, ok := lookup(KeyNotes); ok {
		if err := json.Unmarshal([]byte(v), &m.Notes); err != nil || len(m.Notes) == 0 || !bytes.HasPrefix(bytes.TrimSpace([]byte(v)), []byte("[")) {
			return m, fmt.Errorf("%s: schema metadata %s is not a JSON array of strings: %q", name, KeyNotes, errtext.Clip(v))
		}
	}
	m.Approximate, _ = lookup(KeyApproximate)
	if err := decodeComplete(name, lookup, &m); err != nil {
		return m, err
	}
	return m, decodeCut(name, lookup, &m)
}

// decodeComplete reads fabricsim.complete and fabricsim.unfinished_flows:
// both absent (a whole run, or a trace older than the keys), complete
// "true" alone, or complete "false" with a positive count.
func decodeComplete(name string, lookup func(string) (string, bool), m *Meta) error {
	c, hasC := lookup(KeyComplete)
	u, hasU := lookup(KeyUnfinished)
	switch {
	case !hasC && !hasU:
		return nil
	case hasC && c == "true" && !hasU:
		return nil
	case hasC && c != "true" && c != "false":
		return fmt.Errorf("%s: schema metadata %s is %q, want \"true\" or \"false\"", name, KeyComplete, errtext.Clip(c))
	case !hasC || c == "true":
		return fmt.Errorf("%s: schema metadata %s is %q without %s=false", name, KeyUnfinished, errtext.Clip(u), KeyComplete)
	case !hasU:
		return fmt.Errorf("%s: schema metadata %s=false without %s", name, KeyComplete, KeyUnfinished)
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("%s: schema metadata %s is %q, want a positive count of flows", name, KeyUnfinished, errtext.Clip(u))
	}
	m.Unfinished = n
	return nil
}

// decodeCut reads fabricsim.cut, which only a partial trace may carry.
func decodeCut(name string, lookup func(string) (string, bool), m *Meta) error {
	v, ok := lookup(KeyCut)
	if !ok {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	var c Cut
	if err := dec.Decode(&c); err != nil || dec.More() || !strings.HasPrefix(strings.TrimSpace(v), "{") {
		return fmt.Errorf("%s: schema metadata %s is not a JSON object of collectives, collectives_not_started and jobs: %q", name, KeyCut, errtext.Clip(v))
	}
	if err := c.check(m.Unfinished); err != nil {
		return fmt.Errorf("%s: schema metadata %s: %v", name, KeyCut, err)
	}
	m.Cut = &c
	return nil
}

// check enforces Cut's invariants against the trace's count of
// unfinished flows: the counts are consistent, each collective and job
// listed once, and no more flows unfinished than the trace says.
func (c *Cut) check(unfinished int64) error {
	if unfinished <= 0 {
		return fmt.Errorf("only a partial trace (%s=false) says what was cut", KeyComplete)
	}
	if c.NotStarted < 0 {
		return fmt.Errorf("collectives_not_started %d is negative", c.NotStarted)
	}
	seen := make(map[int64]bool, len(c.Collectives))
	var sum int64
	for _, cc := range c.Collectives {
		if seen[cc.ID] || cc.ID < 0 {
			return fmt.Errorf("collective_id %d is negative or listed twice", cc.ID)
		}
		seen[cc.ID] = true
		if cc.Finished < 1 || cc.Flows <= cc.Finished {
			return fmt.Errorf("collective %d: %d of %d flows finished, want 0 < finished < flows", cc.ID, cc.Finished, cc.Flows)
		}
		if !addWithin(&sum, cc.Flows-cc.Finished, unfinished) {
			return fmt.Errorf("its collectives have more unfinished flows than %s %d", KeyUnfinished, unfinished)
		}
	}
	jobs := make(map[string]bool, len(c.Jobs))
	sum = 0
	for _, j := range c.Jobs {
		if jobs[j.Job] || j.Job == "" {
			return fmt.Errorf("job %q is empty or listed twice", errtext.Clip(j.Job))
		}
		jobs[j.Job] = true
		if j.Finished < 0 || j.Flows <= j.Finished {
			return fmt.Errorf("job %q: %d of %d flows finished, want 0 <= finished < flows", errtext.Clip(j.Job), j.Finished, j.Flows)
		}
		if !addWithin(&sum, j.Flows-j.Finished, unfinished) {
			return fmt.Errorf("its jobs have more unfinished flows than %s %d", KeyUnfinished, unfinished)
		}
	}
	return nil
}

// addWithin adds d (> 0) to *sum (<= limit) unless that goes above limit,
// compared before adding so that crafted counts cannot overflow past it.
func addWithin(sum *int64, d, limit int64) bool {
	if d > limit-*sum {
		return false
	}
	*sum += d
	return true
}
