package stream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Error locates bad input: the stream's name, the record index (the header is
// record 0), the record kind and the field.
type Error struct {
	Name   string
	Record int
	Kind   string
	Field  string
	Err    error
}

func (e *Error) Error() string {
	s := e.Name + ": record " + fmt.Sprint(e.Record)
	if e.Kind != "" {
		s += " (" + e.Kind + ")"
	}
	if e.Field != "" {
		s += ", field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTruncated is wrapped by the error returned when input ends before the trailer.
var ErrTruncated = errors.New("stream ended without a trailer (truncated input?)")

// Reader reads a stream record by record. Call Next, then one of the body
// methods (Topology, Flow, Group, Collective, Decode, Raw) or nothing to skip.
type Reader struct {
	br      *bufio.Reader // shared with dec, which buffers nothing itself
	noFast  bool          // tests: decode everything the strict way
	dec     *msgpack.Decoder
	name    string
	idx     int
	kind    string
	pending bool // the current record's body has not been read
	counts  map[string]int64
	flows   int64
	done    bool
	Header  Header
	// interned holds one copy of each short string read (internStr)
	interned map[string]string
}

// NewReader reads and checks the header. name labels errors ("<stdin>" or a path).
func NewReader(r io.Reader, name string) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<18)
	sr := &Reader{br: br, dec: msgpack.NewDecoder(br), name: name, counts: map[string]int64{}}
	if _, err := sr.dec.PeekCode(); err == io.EOF {
		return nil, sr.errf("", errors.New("empty input: expected a fabricsim stream (pipe topogen's output in)"))
	}
	kind, err := sr.frame()
	if err != nil {
		return nil, err
	}
	if kind != KindHeader {
		return nil, sr.errf("", fmt.Errorf("first record is %q, expected %q", kind, KindHeader))
	}
	h := &sr.Header
	err = sr.eachKey(func(key string) error {
		var err error
		switch key {
		case "format":
			h.Format, err = sr.str(key)
		case "version":
			var v int64
			v, err = sr.int(key)
			h.Version = int(v)
		case "producer":
			h.Producer, err = sr.str(key)
		default:
			err = sr.skip(key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sr.pending = false
	if h.Format != Format {
		return nil, sr.errf("format", fmt.Errorf("%q is not %q", h.Format, Format))
	}
	if h.Version < MinVersion || h.Version > Version {
		return nil, sr.errf("version", fmt.Errorf("unknown version %d (this program reads versions %d to %d)", h.Version, MinVersion, Version))
	}
	return sr, nil
}

// DecodeRaw decodes a record body kept from Reader.Raw with decode (e.g.
// (*Reader).Topology), so a filter can use a record and still forward its
// bytes unchanged. Errors are located as if read in place: stream name,
// record index and kind.
func DecodeRaw[T any](kind string, raw []byte, name string, record int, decode func(*Reader) (T, error)) (T, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	r := &Reader{br: br, dec: msgpack.NewDecoder(br), name: name, idx: record, kind: kind, pending: true, counts: map[string]int64{}, done: true}
	v, err := decode(r)
	if err == nil {
		if _, perr := r.dec.PeekCode(); perr != io.EOF {
			err = r.errf("", errors.New("data after the record body"))
		}
	}
	return v, err
}

// Name is the label used in errors.
func (r *Reader) Name() string { return r.name }

// Index is the current record's index.
func (r *Reader) Index() int { return r.idx }

// Kind is the current record's kind.
func (r *Reader) Kind() string { return r.kind }

// Errorf builds an Error located at the current record, for semantic checks
// made by callers after decoding.
func (r *Reader) Errorf(field, format string, args ...any) error {
	return r.errf(field, fmt.Errorf(format, args...))
}

func (r *Reader) errf(field string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = errors.New("unexpected end of input")
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{Name: r.name, Record: r.idx, Kind: r.kind, Field: field, Err: err}
}

// frame reads the [kind, body] array header and the kind.
func (r *Reader) frame() (string, error) {
	if !r.noFast {
		if kind, ok := r.fastFrame(); ok {
			r.kind = kind
			r.pending = true
			return kind, nil
		}
	}
	r.kind = ""
	c, err := r.dec.PeekCode()
	if err != nil {
		return "", r.errf("", err)
	}
	if !isArray(c) {
		return "", r.errf("", fmt.Errorf("expected a [kind, body] array, found %s (not a fabricsim stream?)", describe(c)))
	}
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return "", r.errf("", err)
	}
	if n != 2 {
		return "", r.errf("", fmt.Errorf("record has %d elements, expected 2 ([kind, body])", n))
	}
	kind, err := r.str("kind")
	if err != nil {
		return "", err
	}
	r.kind = kind
	r.pending = true
	return kind, nil
}

// Next advances to the next record and returns its kind. A second header
// or topology record is an error. After the trailer it checks the
// trailer's counts and returns io.EOF.
func (r *Reader) Next() (string, error) {
	if r.done {
		return "", io.EOF
	}
	if r.pending {
		if err := r.skip(""); err != nil {
			return "", err
		}
		r.pending = false
	}
	r.idx++
	r.kind = ""
	if _, err := r.dec.PeekCode(); err == io.EOF {
		return "", r.errf("", ErrTruncated)
	}
	kind, err := r.frame()
	if err != nil {
		return "", err
	}
	switch kind {
	case KindHeader:
		return "", r.errf("", errors.New("second header record"))
	case KindTrailer:
		if err := r.readTrailer(); err != nil {
			return "", err
		}
		r.done = true
		return "", io.EOF
	case KindTopology:
		if r.counts[KindTopology] > 0 {
			return "", r.errf("", errors.New("second topology record (a stream holds one)"))
		}
		r.counts[kind]++
	case KindFlow:
		r.flows++
	default:
		r.counts[kind]++
	}
	return kind, nil
}

func (r *Reader) readTrailer() error {
	got := map[string]int64{}
	err := r.eachKey(func(key string) error {
		if key != "counts" {
			return r.skip(key)
		}
		return r.eachKeyField(key, func(k string) error {
			v, err := r.int("counts." + k)
			got[k] = v
			return err
		})
	})
	if err != nil {
		return err
	}
	r.pending = false
	have := r.Counts()
	kinds := make([]string, 0, len(got)+len(have))
	for k := range got {
		kinds = append(kinds, k)
	}
	for k := range have {
		if _, ok := got[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if got[k] != have[k] {
			return r.errf("counts."+k, fmt.Errorf("trailer says %d %s records, the stream held %d", got[k], k, have[k]))
		}
	}
	if _, err := r.dec.PeekCode(); err != io.EOF {
		return r.errf("", errors.New("data after the trailer"))
	}
	return nil
}

// Counts returns the records read so far, by kind (header and trailer excluded).
func (r *Reader) Counts() map[string]int64 {
	c := make(map[string]int64, len(r.counts)+1)
	for k, v := range r.counts {
		c[k] = v
	}
	if r.flows > 0 {
		c[KindFlow] = r.flows
	}
	return c
}

func (r *Reader) body(kind string) error {
	if !r.pending {
		return r.errf("", fmt.Errorf("body already read"))
	}
	if r.kind != kind {
		return r.errf("", fmt.Errorf("record is %q, not %q", r.kind, kind))
	}
	r.pending = false
	return nil
}

// Raw returns the current record's body bytes, unchanged.
func (r *Reader) Raw() (msgpack.RawMessage, error) {
	if err := r.body(r.kind); err != nil {
		return nil, err
	}
	raw, err := r.dec.DecodeRaw()
	if err != nil {
		return nil, r.errf("", err)
	}
	return raw, nil
}

// Decode decodes the current body into v by reflection (for kinds without a
// dedicated method).
func (r *Reader) Decode(v any) error {
	if err := r.body(r.kind); err != nil {
		return err
	}
	if err := r.dec.Decode(v); err != nil {
		return r.errf("", err)
	}
	return nil
}

// Flow decodes the current flow record into f, reusing f.Deps.
func (r *Reader) Flow(f *Flow) error {
	if err := r.body(KindFlow); err != nil {
		return err
	}
	if !r.noFast && r.fastFlow(f) {
		return nil
	}
	n, err := r.arrayLen("")
	if err != nil {
		return err
	}
	if n < 10 || n > 12 {
		return r.errf("", fmt.Errorf("flow has %d fields, expected 10 to 12 (id, collective, src, dst, size, deps, channel, chunk, chunk_count, conn_type[, delay_ps[, pace_ps]])", n))
	}
	if f.ID, err = r.int("id"); err != nil {
		return err
	}
	if f.Collective, err = r.int("collective"); err != nil {
		return err
	}
	if f.Src, err = r.int32("src"); err != nil {
		return err
	}
	if f.Dst, err = r.int32("dst"); err != nil {
		return err
	}
	if f.Size, err = r.int("size"); err != nil {
		return err
	}
	nd, err := r.arrayLen("deps")
	if err != nil {
		return err
	}
	f.Deps = f.Deps[:0]
	for i := 0; i < nd; i++ {
		d, err := r.int("deps")
		if err != nil {
			return err
		}
		f.Deps = append(f.Deps, d)
	}
	if f.Channel, err = r.int32("channel"); err != nil {
		return err
	}
	if f.Chunk, err = r.int32("chunk"); err != nil {
		return err
	}
	if f.ChunkCount, err = r.int32("chunk_count"); err != nil {
		return err
	}
	if f.ConnType, err = r.str("conn_type"); err != nil {
		return err
	}
	f.DelayPs, f.PacePs = 0, 0
	if n >= 11 {
		if f.DelayPs, err = r.int("delay_ps"); err != nil {
			return err
		}
	}
	if n == 12 {
		if f.PacePs, err = r.int("pace_ps"); err != nil {
			return err
		}
	}
	switch {
	case f.Size < 0:
		return r.errf("size", fmt.Errorf("negative size %d", f.Size))
	case f.DelayPs < 0:
		return r.errf("delay_ps", fmt.Errorf("negative delay %d", f.DelayPs))
	case f.PacePs < 0:
		return r.errf("pace_ps", fmt.Errorf("negative pace %d", f.PacePs))
	}
	return nil
}

// Job decodes the current job record: a name of 1 to 256 bytes, the
// start and first ids not negative (start at most 10^15 ps, 1000 s).
func (r *Reader) Job() (*Job, error) {
	if err := r.body(KindJob); err != nil {
		return nil, err
	}
	j := &Job{}
	err := r.eachKey(func(key string) error {
		var err error
		var v *int64
		switch key {
		case "name":
			j.Name, err = r.str(key)
			if err == nil && (j.Name == "" || len(j.Name) > 256) {
				err = r.Errorf(key, "a job's name has 1 to 256 bytes, not %d", len(j.Name))
			}
			return err
		case "start_ps":
			v = &j.StartPs
		case "first_group":
			v = &j.FirstGroup
		case "first_collective":
			v = &j.FirstCollective
		case "first_flow":
			v = &j.FirstFlow
		default:
			return r.skip(key)
		}
		if *v, err = r.int(key); err != nil {
			return err
		}
		if *v < 0 || key == "start_ps" && *v > 1e15 {
			return r.Errorf(key, "%d is out of range", *v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if j.Name == "" {
		return nil, r.Errorf("name", "missing")
	}
	return j, nil
}

// Note decodes the current note record: a text of 1 to MaxNoteBytes
// bytes, a producer of at most 256.
func (r *Reader) Note() (*Note, error) {
	if err := r.body(KindNote); err != nil {
		return nil, err
	}
	n := &Note{}
	err := r.eachKey(func(key string) error {
		var err error
		switch key {
		case "producer":
			if n.Producer, err = r.str(key); err == nil && len(n.Producer) > 256 {
				err = r.Errorf(key, "%d bytes, at most 256", len(n.Producer))
			}
		case "text":
			if n.Text, err = r.str(key); err == nil && len(n.Text) > MaxNoteBytes {
				err = r.Errorf(key, "%d bytes, at most %d", len(n.Text), MaxNoteBytes)
			}
		default:
			err = r.skip(key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if n.Text == "" {
		return nil, r.Errorf("text", "missing")
	}
	return n, nil
}

// Group decodes the current group record.
func (r *Reader) Group() (*Group, error) {
	if err := r.body(KindGroup); err != nil {
		return nil, err
	}
	g := &Group{}
	err := r.eachKey(func(key string) error {
		var err error
		switch key {
		case "id":
			g.ID, err = r.int(key)
		case "type":
			g.Type, err = r.str(key)
		case "ranks":
			var n int
			if n, err = r.arrayLen(key); err != nil {
				return err
			}
			g.Ranks = make([]int32, 0, min(n, 1<<12))
			for i := 0; i < n; i++ {
				v, err := r.int32(fmt.Sprintf("ranks[%d]", i))
				if err != nil {
					return err
				}
				g.Ranks = append(g.Ranks, v)
			}
		case "siblings":
			var n int
			if n, err = r.arrayLen(key); err != nil {
				return err
			}
			g.Siblings = make([]int64, 0, min(n, 1<<12))
			for i := 0; i < n; i++ {
				v, err := r.int(fmt.Sprintf("siblings[%d]", i))
				if err != nil {
					return err
				}
				g.Siblings = append(g.Siblings, v)
			}
		default:
			err = r.skip(key)
		}
		return err
	})
	return g, err
}

// Collective decodes the current collective record.
func (r *Reader) Collective() (*Collective, error) {
	if err := r.body(KindCollective); err != nil {
		return nil, err
	}
	c := &Collective{Layer: -1, Microbatch: -1, Stage: -1}
	err := r.eachKey(func(key string) error {
		var err error
		var v int64
		switch key {
		case "id":
			c.ID, err = r.int(key)
		case "op":
			c.Op, err = r.str(key)
		case "size":
			c.Size, err = r.int(key)
		case "group":
			c.Group, err = r.int(key)
		case "algorithm":
			c.Algorithm, err = r.str(key)
		case "protocol":
			c.Protocol, err = r.str(key)
		case "channels":
			v, err = r.int(key)
			c.Channels = int(v)
		case "predicted_ps":
			c.PredictedPs, err = r.int(key)
		case "pxn":
			c.PXN, err = r.bool(key)
		case "label":
			c.Label, err = r.str(key)
		case "layer_name":
			c.LayerName, err = r.str(key)
		case "phase":
			c.Phase, err = r.str(key)
		case "cut":
			c.Cut, err = r.cut(key)
		case "send_lat_ps", "fabric_lat_ps":
			v, err = r.int(key)
			if err == nil && (v < 0 || v > maxCutLatPs) {
				err = r.errf(key, fmt.Errorf("%d is out of range (0 to %d)", v, int64(maxCutLatPs)))
			}
			if key == "send_lat_ps" {
				c.SendLatPs = v
			} else {
				c.FabricLatPs = v
			}
		case "layer", "microbatch", "stage":
			v, err = r.int(key)
			if err == nil && (v < -1 || v > math.MaxInt32) {
				err = r.errf(key, fmt.Errorf("%d is out of range (-1 to %d)", v, math.MaxInt32))
			}
			switch key {
			case "layer":
				c.Layer = int32(v)
			case "microbatch":
				c.Microbatch = int32(v)
			default:
				c.Stage = int32(v)
			}
		default:
			err = r.skip(key)
		}
		return err
	})
	return c, err
}

// Bounds of a cut's values: a chunk is at most a collective's 1 TiB, a
// step latency at most a second, a collective's time at most a flow's
// delay_ps (2^56 ps).
const (
	maxCutChunk  = 1 << 40
	maxCutLatPs  = 1e12
	maxCutTimePs = 1 << 56
)

// MaxFirstFlow bounds a cut's first_flow: expanded flows' ids, first_flow
// plus their index in the expansion, then stay far from overflowing.
const MaxFirstFlow = 1 << 56

// cut decodes a collective's cut map: non-negative integers within their
// bounds; unknown keys are skipped, as in every record.
func (r *Reader) cut(key string) (*Cut, error) {
	c := &Cut{}
	err := r.eachKeyField(key, func(k string) error {
		field := key + "." + k
		var dst *int64
		limit := int64(maxCutLatPs)
		switch k {
		case "chunk_bytes":
			dst, limit = &c.ChunkBytes, maxCutChunk
		case "max_chunks":
			dst, limit = &c.MaxChunks, math.MaxInt32
		case "base_lat_ps":
			dst = &c.BaseLatPs
		case "intra_lat_ps":
			dst = &c.IntraLatPs
		case "inter_lat_ps":
			dst = &c.InterLatPs
		case "step_bytes":
			dst, limit = &c.StepBytes, maxCutChunk
		case "step_intra_ps":
			dst = &c.StepIntraPs
		case "step_inter_ps":
			dst = &c.StepInterPs
		case "step_serial_ps":
			dst = &c.StepSerialPs
		case "step_proxy_ps":
			dst = &c.StepProxyPs
		case "step_pace_ps":
			dst = &c.StepPacePs
		case "max_recvs":
			dst, limit = &c.MaxRecvs, 1<<20
		case "step_tree_fs":
			dst = &c.StepTreeFs
		case "step_tree_share":
			dst, limit = &c.StepTreeShare, 1
		case "step_tree_whole":
			dst, limit = &c.StepTreeWhole, 1
		case "launch_floor_ps":
			dst = &c.LaunchFloorPs
		case "nvlink_lock_ps":
			dst, limit = &c.NVLinkLockPs, maxCutTimePs
		case "ring_conn_ps":
			dst, limit = &c.RingConnPs, maxCutTimePs
		case "first_flow":
			c.FirstFlow = new(int64)
			dst, limit = c.FirstFlow, MaxFirstFlow
		default:
			return r.skip(field)
		}
		v, err := r.int(field)
		if err == nil && (v < 0 || v > limit) {
			err = r.errf(field, fmt.Errorf("%d is out of range (0 to %d)", v, limit))
		}
		*dst = v
		return err
	})
	return c, err
}

// Topology decodes the current topology record.
func (r *Reader) Topology() (*Topology, error) {
	if err := r.body(KindTopology); err != nil {
		return nil, err
	}
	t := &Topology{Params: map[string]string{}}
	err := r.eachKey(func(key string) error {
		var err error
		var v int64
		switch key {
		case "family":
			t.Family, err = r.str(key)
		case "params":
			err = r.eachKeyField(key, func(k string) error {
				s, err := r.str("params." + k)
				t.Params[k] = s
				return err
			})
		case "gpus":
			v, err = r.int(key)
			t.GPUs = int(v)
		case "gpus_per_server":
			v, err = r.int(key)
			t.GPUsPerServer = int(v)
		case "nvswitches_per_server":
			v, err = r.int(key)
			t.NVSwitchesPerServer = int(v)
		case "gpu_type":
			t.GPUType, err = r.str(key)
		case "nodes":
			err = r.nodes(t)
		case "links":
			err = r.links(t)
		default:
			err = r.skip(key)
		}
		return err
	})
	if err == nil {
		err = r.checkTopology(t)
	}
	return t, err
}

// checkTopology holds the record to what every consumer relies on: GPUs
// first among the nodes and in whole servers, node ids their positions,
// links between two distinct nodes with a positive, finite bandwidth. A
// record that breaks it is refused here, once for every program.
// Link ranges of the stream contract: every bandwidth from 10 Mbps to
// 1 Pbps, every latency up to 1 s. A 1 TiB flow (the largest a stream
// carries) then takes at most 9e17 ps, within the simulators' int64
// picoseconds; outside them a run overflowed its times (a link of 1 bit/s
// reported 9.2e6 s, --nic-bw 1e-30Gbps negative ideal FCTs).
const (
	MinLinkBps       = 1e7
	MaxLinkBps       = 1e15
	MaxLinkLatencyPs = 1e12
)

func (r *Reader) checkTopology(t *Topology) error {
	switch {
	case t.GPUs < 1 || t.GPUs > len(t.Nodes):
		return r.errf("gpus", fmt.Errorf("%d GPUs in a topology of %d nodes", t.GPUs, len(t.Nodes)))
	case t.GPUsPerServer < 1 || t.GPUs%t.GPUsPerServer != 0:
		return r.errf("gpus_per_server", fmt.Errorf("%d GPUs per server do not divide the %d GPUs", t.GPUsPerServer, t.GPUs))
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if int(n.ID) != i {
			return r.errf(fmt.Sprintf("nodes[%d].id", i), fmt.Errorf("id %d, want its position %d", n.ID, i))
		}
		if gpu := n.Kind == NodeGPU; gpu != (i < t.GPUs) {
			return r.errf(fmt.Sprintf("nodes[%d].kind", i), fmt.Errorf("%q: nodes 0..%d are the GPUs, the others are not", n.Kind, t.GPUs-1))
		}
	}
	for i := range t.Links {
		l := &t.Links[i]
		f := func(name string) string { return fmt.Sprintf("links[%d].%s", i, name) }
		switch {
		case l.A < 0 || int(l.A) >= len(t.Nodes):
			return r.errf(f("a"), fmt.Errorf("node %d of %d", l.A, len(t.Nodes)))
		case l.B < 0 || int(l.B) >= len(t.Nodes) || l.B == l.A:
			return r.errf(f("b"), fmt.Errorf("node %d (a is %d, %d nodes)", l.B, l.A, len(t.Nodes)))
		case !(l.BWbps >= MinLinkBps && l.BWbps <= MaxLinkBps): // NaN fails too
			return r.errf(f("bw_bps"), fmt.Errorf("%g bit/s: want a bandwidth from %g (10 Mbps) to %g (1 Pbps)", l.BWbps, MinLinkBps, MaxLinkBps))
		case l.LatencyPs < 0 || l.LatencyPs > MaxLinkLatencyPs:
			return r.errf(f("latency_ps"), fmt.Errorf("%d ps: want a latency from 0 to %d (1 s)", l.LatencyPs, int64(MaxLinkLatencyPs)))
		case !(l.ErrorRate >= 0 && l.ErrorRate < 1):
			return r.errf(f("error_rate"), fmt.Errorf("%g: want 0 <= rate < 1", l.ErrorRate))
		}
	}
	return nil
}

func (r *Reader) nodes(t *Topology) error {
	n, err := r.arrayLen("nodes")
	if err != nil {
		return err
	}
	t.Nodes = make([]Node, 0, min(n, 1<<12))
	for i := 0; i < n; i++ {
		f := func(name string) string { return fmt.Sprintf("nodes[%d].%s", i, name) }
		m, err := r.arrayLen(fmt.Sprintf("nodes[%d]", i))
		if err != nil {
			return err
		}
		if m != 7 {
			return r.errf(fmt.Sprintf("nodes[%d]", i), fmt.Errorf("node has %d fields, expected 7 (id, kind, role, tier, server, group, plane)", m))
		}
		var nd Node
		var v int64
		if nd.ID, err = r.int32(f("id")); err != nil {
			return err
		}
		if nd.Kind, err = r.str(f("kind")); err != nil {
			return err
		}
		if nd.Role, err = r.str(f("role")); err != nil {
			return err
		}
		if v, err = r.int(f("tier")); err != nil {
			return err
		}
		nd.Tier = int8(v)
		if nd.Server, err = r.int32(f("server")); err != nil {
			return err
		}
		if nd.Group, err = r.int32(f("group")); err != nil {
			return err
		}
		if v, err = r.int(f("plane")); err != nil {
			return err
		}
		nd.Plane = int8(v)
		t.Nodes = append(t.Nodes, nd)
	}
	return nil
}

func (r *Reader) links(t *Topology) error {
	n, err := r.arrayLen("links")
	if err != nil {
		return err
	}
	t.Links = make([]Link, 0, min(n, 1<<12))
	for i := 0; i < n; i++ {
		f := func(name string) string { return fmt.Sprintf("links[%d].%s", i, name) }
		m, err := r.arrayLen(fmt.Sprintf("links[%d]", i))
		if err != nil {
			return err
		}
		if m != 6 {
			return r.errf(fmt.Sprintf("links[%d]", i), fmt.Errorf("link has %d fields, expected 6 (a, b, bw_bps, latency_ps, error_rate, kind)", m))
		}
		var l Link
		if l.A, err = r.int32(f("a")); err != nil {
			return err
		}
		if l.B, err = r.int32(f("b")); err != nil {
			return err
		}
		if l.BWbps, err = r.float(f("bw_bps")); err != nil {
			return err
		}
		if l.LatencyPs, err = r.int(f("latency_ps")); err != nil {
			return err
		}
		if l.ErrorRate, err = r.float(f("error_rate")); err != nil {
			return err
		}
		if l.Kind, err = r.str(f("kind")); err != nil {
			return err
		}
		t.Links = append(t.Links, l)
	}
	return nil
}

// --- typed primitives: each checks the msgpack type and names the field ---

func (r *Reader) peek(field string) (byte, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return 0, r.errf(field, err)
	}
	return c, nil
}

func (r *Reader) int(field string) (int64, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, r.errf(field, fmt.Errorf("expected an integer, found %s", describe(c)))
	}
	v, err := r.dec.DecodeInt64()
	if err != nil {
		return 0, r.errf(field, err)
	}
	return v, nil
}

func (r *Reader) int32(field string) (int32, error) {
	v, err := r.int(field)
	if err != nil {
		return 0, err
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, r.errf(field, fmt.Errorf("%d does not fit in 32 bits", v))
	}
	return int32(v), nil
}

func (r *Reader) float(field string) (float64, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	if !isInt(c) && c != msgpcode.Float && c != msgpcode.Double {
		return 0, r.errf(field, fmt.Errorf("expected a number, found %s", describe(c)))
	}
	v, err := r.dec.DecodeFloat64()
	if err != nil {
		return 0, r.errf(field, err)
	}
	return v, nil
}

func (r *Reader) bool(field string) (bool, error) {
	c, err := r.peek(field)
	if err != nil {
		return false, err
	}
	if c != msgpcode.True && c != msgpcode.False {
		return false, r.errf(field, fmt.Errorf("expected a boolean, found %s", describe(c)))
	}
	v, err := r.dec.DecodeBool()
	if err != nil {
		return false, r.errf(field, err)
	}
	return v, nil
}

func (r *Reader) str(field string) (string, error) {
	c, err := r.peek(field)
	if err != nil {
		return "", err
	}
	if !msgpcode.IsFixedString(c) && c != msgpcode.Str8 && c != msgpcode.Str16 && c != msgpcode.Str32 {
		return "", r.errf(field, fmt.Errorf("expected a string, found %s", describe(c)))
	}
	if s, ok := r.internStr(c); ok {
		return s, nil
	}
	s, err := r.dec.DecodeString()
	if err != nil {
		return "", r.errf(field, err)
	}
	return s, nil
}

// internStr reads a short string (fixstr, code c) straight from the
// buffer and returns one shared copy per distinct value: keys and the
// op, algorithm and protocol names repeat on every record, and a 9216-GPU
// stream has 100 k collective records. false leaves the input untouched
// (a longer string, or one not yet buffered whole).
func (r *Reader) internStr(c byte) (string, bool) {
	if r.noFast || !msgpcode.IsFixedString(c) {
		return "", false
	}
	n := int(c & 0x1f)
	b, err := r.br.Peek(1 + n)
	if err != nil {
		return "", false
	}
	s, ok := r.interned[string(b[1:])]
	if !ok {
		if len(r.interned) >= 1<<12 {
			return "", false
		}
		if r.interned == nil {
			r.interned = map[string]string{}
		}
		s = string(b[1:])
		r.interned[s] = s
	}
	r.br.Discard(1 + n)
	return s, true
}

func (r *Reader) arrayLen(field string) (int, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, r.errf(field, fmt.Errorf("expected an array, found %s", describe(c)))
	}
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return 0, r.errf(field, err)
	}
	return n, nil
}

func (r *Reader) skip(field string) error {
	if err := r.dec.Skip(); err != nil {
		return r.errf(field, err)
	}
	return nil
}

// eachKey iterates over the body map's string keys; fn must consume the value.
func (r *Reader) eachKey(fn func(key string) error) error {
	return r.eachKeyField("", fn)
}

func (r *Reader) eachKeyField(field string, fn func(key string) error) error {
	c, err := r.peek(field)
	if err != nil {
		return err
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return r.errf(field, fmt.Errorf("expected a map, found %s", describe(c)))
	}
	n, err := r.dec.DecodeMapLen()
	if err != nil {
		return r.errf(field, err)
	}
	for i := 0; i < n; i++ {
		key, err := r.str(field + " key")
		if err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	return nil
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func describe(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case isInt(c):
		return "an integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "a float"
	case c == msgpcode.True || c == msgpcode.False:
		return "a boolean"
	case msgpcode.IsString(c):
		return "a string"
	case isArray(c):
		return "an array"
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return "a map"
	case msgpcode.IsBin(c):
		return "binary data"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// ReadTopology reads r to its end and returns its topology record: reading
// on catches a truncated input (the trailer check) and never cuts the
// writer upstream off mid-stream. A stream without one is an error.
func ReadTopology(r *Reader) (*Topology, error) {
	var top *Topology
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if kind == KindTopology {
			if top, err = r.Topology(); err != nil {
				return nil, err
			}
		}
	}
	if top == nil {
		return nil, fmt.Errorf("%s: no topology record (pipe topogen's output in)", r.Name())
	}
	return top, nil
}
