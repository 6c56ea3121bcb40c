// Package links writes and reads the per-link load file fabricsim.links/v2:
// which directed links of the fabric carried how many bytes, by group type,
// op and job, over a whole run (fabricsim.links/v1, without the job
// column, is still read). formats/links.md is the normative description.
//
// Write takes the rows in any order and writes Parquet (.parquet, .pq:
// with the metadata) or plain CSV (.csv: one header line, no metadata);
// Read reads the Parquet form back and checks it.
package links

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// SchemaName is the value of the fabricsim.schema metadata key.
const SchemaName = "fabricsim.links/v2"

// SchemaV1 is the previous schema, without the job column: read with Job
// empty.
const SchemaV1 = "fabricsim.links/v1"

// Metadata keys (Parquet key/value metadata).
const (
	KeySchema      = "fabricsim.schema"
	KeyBackend     = "fabricsim.backend"
	KeyRouting     = "fabricsim.routing"
	KeyMakespanNs  = "fabricsim.makespan_ns"
	KeyGranularity = "fabricsim.granularity"
	KeyTopology    = "fabricsim.topology"
	// Optional, together: a run whose failed links left flows no path.
	KeyFailedFlows      = "fabricsim.failed_flows"
	KeyUndeliveredBytes = "fabricsim.undelivered_bytes"
)

// None is the group_type and op of bytes that belong to no collective
// (synthetic traffic, raw flows).
const None = "none"

// Routings allowed in Meta.Routing (flowsim-packet's --routing names).
var Routings = []string{"ecmp", "spray", "flowlet", "adaptive"}

// Granularities allowed in Meta.Granularity: the stream's flows as they
// were ("flow"), COLL nodes priced by their traffic matrix ("collective"),
// or COLL nodes cut into their flows (flowsim-analytical --expand,
// "expanded").
var Granularities = []string{"flow", "collective", "expanded"}

// Row is the bytes one group type and op moved over one directed link.
//
// Row is also the Parquet row handed to parquet-go: field order and tags
// give the column order and names (formats/links.md). Go int32/int64 map
// to INT32/INT64 with a signed INTEGER annotation, float64 to DOUBLE,
// string to BYTE_ARRAY with the STRING annotation, dictionary-encoded.
type Row struct {
	Link        int32   `parquet:"link"`            // index into the topology's links
	Src         int32   `parquet:"src"`             // node the bytes leave (the direction)
	Dst         int32   `parquet:"dst"`             // node they enter
	SrcRole     string  `parquet:"src_role,dict"`   // gpu, nvswitch, asw, psw, dsw, edge, agg, core, router (pkg/topo Role*)
	DstRole     string  `parquet:"dst_role,dict"`   // as SrcRole
	Tier        string  `parquet:"tier,dict"`       // SrcRole + "-" + DstRole, e.g. gpu-edge (NIC up), edge-gpu (NIC down)
	Kind        string  `parquet:"kind,dict"`       // nvlink, pcie, nic, fabric
	BWbps       float64 `parquet:"bw_bps"`          // the link's bandwidth in that direction, bit/s
	GroupType   string  `parquet:"group_type,dict"` // TP, DP, EP, PP, DP_EP; "none" without a group
	Op          string  `parquet:"op,dict"`         // allreduce, alltoall, ... as the flow trace's op; "none" without one
	Job         string  `parquet:"job,dict"`        // the job that sent the bytes (formats/stream.md, Jobs); "" in a stream without jobs (v2)
	Bytes       int64   `parquet:"bytes"`           // wire bytes carried in that direction over the run
	BusyNs      int64   `parquet:"busy_ns"`         // Bytes*8/BWbps in ns: the time the link needed for them
	Utilization float64 `parquet:"utilization"`     // BusyNs / makespan_ns: the run's average, not its peak
}

// Meta is the file-level metadata.
type Meta struct {
	Backend     string             // analytical-busbw, analytical-fluid, packet (trace.Backends)
	Routing     string             // ecmp, spray, flowlet, adaptive
	MakespanNs  int64              // the run's makespan, the denominator of Utilization
	Granularity string             // flow, collective, expanded
	Topology    trace.TopologyMeta // as the flow trace's fabricsim.topology
	// FailedFlows and UndeliveredBytes: the flows a failed link left no
	// path (status failed in the flow trace) and the bytes they never
	// delivered; 0 for a run that delivered everything. The loads are
	// of the bytes that moved, so a reader must say the run failed.
	FailedFlows, UndeliveredBytes int64
	// Schema is the schema name Read found (SchemaName or SchemaV1);
	// Write ignores it and writes SchemaName.
	Schema string
}

// Tier returns the tier name of a directed link from a node of role src to
// one of role dst: "gpu-edge", "agg-core", ...
func Tier(src, dst string) string { return src + "-" + dst }

// BusyNs is the time in ns a link of bwBps needs for bytes, to the nearest.
func BusyNs(bytes int64, bwBps float64) int64 {
	return int64(math.Round(float64(bytes) * 8 / bwBps * 1e9))
}

// Column names in the schema's order.
var columns = []string{"link", "src", "dst", "src_role", "dst_role", "tier", "kind", "bw_bps",
	"group_type", "op", "job", "bytes", "busy_ns", "utilization"}

// ColumnNames returns the names of the columns in order.
func ColumnNames() []string { return slices.Clone(columns) }

// encodeMeta renders m as the six metadata key/value pairs, and the
// failed pair when flows failed.
func encodeMeta(m Meta) (keys, values []string, err error) {
	if !slices.Contains(trace.Backends, m.Backend) {
		return nil, nil, fmt.Errorf("links: backend %q is not one of %s", m.Backend, strings.Join(trace.Backends, ", "))
	}
	if !slices.Contains(Routings, m.Routing) {
		return nil, nil, fmt.Errorf("links: routing %q is not one of %s", m.Routing, strings.Join(Routings, ", "))
	}
	if !slices.Contains(Granularities, m.Granularity) {
		return nil, nil, fmt.Errorf("links: granularity %q is not one of %s", m.Granularity, strings.Join(Granularities, ", "))
	}
	if m.MakespanNs < 0 {
		return nil, nil, fmt.Errorf("links: makespan %d ns is negative", m.MakespanNs)
	}
	tj, err := json.Marshal(m.Topology)
	if err != nil {
		return nil, nil, fmt.Errorf("links: topology: %w", err)
	}
	keys = []string{KeySchema, KeyBackend, KeyRouting, KeyMakespanNs, KeyGranularity, KeyTopology}
	values = []string{SchemaName, m.Backend, m.Routing, strconv.FormatInt(m.MakespanNs, 10), m.Granularity, string(tj)}
	switch {
	case m.FailedFlows < 0 || m.UndeliveredBytes < 0 || (m.FailedFlows == 0 && m.UndeliveredBytes > 0):
		return nil, nil, fmt.Errorf("links: %d failed flows with %d undelivered bytes", m.FailedFlows, m.UndeliveredBytes)
	case m.FailedFlows > 0:
		keys = append(keys, KeyFailedFlows, KeyUndeliveredBytes)
		values = append(values, strconv.FormatInt(m.FailedFlows, 10), strconv.FormatInt(m.UndeliveredBytes, 10))
	}
	return keys, values, nil
}

// decodeFailed reads the optional pair fabricsim.failed_flows (a
// positive count) and fabricsim.undelivered_bytes (from 0): both or
// neither.
func decodeFailed(name string, lookup func(string) (string, bool), m *Meta) error {
	f, okF := lookup(KeyFailedFlows)
	u, okU := lookup(KeyUndeliveredBytes)
	if !okF && !okU {
		return nil
	}
	if okF != okU {
		return fmt.Errorf("%s: metadata %s and %s go together; the file has one", name, KeyFailedFlows, KeyUndeliveredBytes)
	}
	var err error
	if m.FailedFlows, err = strconv.ParseInt(f, 10, 64); err != nil || m.FailedFlows <= 0 {
		return fmt.Errorf("%s: metadata %s is %q, want a positive integer", name, KeyFailedFlows, errtext.Clip(f))
	}
	if m.UndeliveredBytes, err = strconv.ParseInt(u, 10, 64); err != nil || m.UndeliveredBytes < 0 {
		return fmt.Errorf("%s: metadata %s is %q, want a non-negative integer (bytes)", name, KeyUndeliveredBytes, errtext.Clip(u))
	}
	return nil
}

// decodeMeta checks and parses the metadata of the file called name.
// Values are checked as the writer does, except that a backend, routing or
// granularity this version does not know is read as it is: a newer
// producer may add one without changing a column.
func decodeMeta(name string, lookup func(string) (string, bool)) (Meta, error) {
	var m Meta
	s, ok := lookup(KeySchema)
	if !ok {
		return m, fmt.Errorf("%s: not a %s file: the Parquet metadata has no %q key", name, SchemaName, KeySchema)
	}
	if s != SchemaName && s != SchemaV1 {
		return m, fmt.Errorf("%s: metadata %s is %q, want %q (or %q)", name, KeySchema, errtext.Clip(s), SchemaName, SchemaV1)
	}
	m.Schema = s
	get := func(key string, dst *string) error {
		v, ok := lookup(key)
		if !ok {
			return fmt.Errorf("%s: the metadata has no %q key", name, key)
		}
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("%s: metadata %s is %q, want a name", name, key, errtext.Clip(v))
		}
		*dst = v
		return nil
	}
	for _, kv := range []struct {
		key string
		dst *string
	}{{KeyBackend, &m.Backend}, {KeyRouting, &m.Routing}, {KeyGranularity, &m.Granularity}} {
		if err := get(kv.key, kv.dst); err != nil {
			return m, err
		}
	}
	v, ok := lookup(KeyMakespanNs)
	if !ok {
		return m, fmt.Errorf("%s: the metadata has no %q key", name, KeyMakespanNs)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return m, fmt.Errorf("%s: metadata %s is %q, want a non-negative integer (ns)", name, KeyMakespanNs, errtext.Clip(v))
	}
	m.MakespanNs = n
	t, ok := lookup(KeyTopology)
	if !ok {
		return m, fmt.Errorf("%s: the metadata has no %q key", name, KeyTopology)
	}
	if err := json.Unmarshal([]byte(t), &m.Topology); err != nil || !strings.HasPrefix(strings.TrimSpace(t), "{") {
		return m, fmt.Errorf("%s: metadata %s is not a JSON object with family, gpus, hash: %q", name, KeyTopology, errtext.Clip(t))
	}
	return m, decodeFailed(name, lookup, &m)
}

// check returns why r cannot be a row of a links file, naming the column,
// or nil.
func check(r *Row) error {
	switch {
	case r.Link < 0:
		return fmt.Errorf("column %q is %d; link indices start at 0", "link", r.Link)
	case r.Src < 0:
		return fmt.Errorf("column %q is %d; node ids start at 0", "src", r.Src)
	case r.Dst < 0:
		return fmt.Errorf("column %q is %d; node ids start at 0", "dst", r.Dst)
	case math.IsNaN(r.BWbps) || math.IsInf(r.BWbps, 0) || r.BWbps <= 0:
		return fmt.Errorf("column %q is %v; a bandwidth is a positive number of bit/s", "bw_bps", r.BWbps)
	case r.Bytes < 0:
		return fmt.Errorf("column %q is %d; bytes carried cannot be negative", "bytes", r.Bytes)
	case r.BusyNs < 0:
		return fmt.Errorf("column %q is %d; a busy time cannot be negative", "busy_ns", r.BusyNs)
	case math.IsNaN(r.Utilization) || math.IsInf(r.Utilization, 0) || r.Utilization < 0:
		return fmt.Errorf("column %q is %v; a utilization is a finite number from 0", "utilization", r.Utilization)
	}
	return nil
}

// Format picks the container from a file name's extension: "parquet" for
// .parquet and .pq, "csv" for .csv; any other extension is an error naming
// the path.
func Format(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return "parquet", nil
	case ".csv":
		return "csv", nil
	}
	return "", fmt.Errorf("%s: unknown links file extension %q (want .parquet, .pq or .csv)", path, filepath.Ext(path))
}
