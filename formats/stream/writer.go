package stream

import (
	"bufio"
	"fmt"
	"io"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// Writer writes a stream: the header on creation, records, and the trailer
// with per-kind counts on Close.
type Writer struct {
	bw     *bufio.Writer
	enc    *msgpack.Encoder
	counts map[string]int64
	flows  int64 // kept apart from counts: flows are the hot path
	closed bool
}

// NewWriter writes the header and returns a Writer. producer is
// "<tool> <version>".
func NewWriter(w io.Writer, producer string) (*Writer, error) {
	bw := bufio.NewWriterSize(w, 1<<18)
	sw := &Writer{bw: bw, enc: msgpack.NewEncoder(bw), counts: map[string]int64{}}
	sw.enc.SetSortMapKeys(true) // deterministic bytes for maps such as params
	if err := sw.begin(KindHeader); err != nil {
		return nil, err
	}
	if err := sw.enc.Encode(Header{Format: Format, Version: Version, Producer: producer}); err != nil {
		return nil, err
	}
	return sw, nil
}

func (w *Writer) begin(kind string) error {
	if w.closed {
		return fmt.Errorf("stream: write of %s record after Close", kind)
	}
	if err := w.enc.EncodeArrayLen(2); err != nil {
		return err
	}
	return w.enc.EncodeString(kind)
}

// Record writes a record whose body is encoded by reflection (a struct with
// msgpack tags or a map). Use it for kinds without a dedicated method.
func (w *Writer) Record(kind string, body any) error {
	if kind == KindHeader || kind == KindTrailer {
		return fmt.Errorf("stream: %s records are written by the Writer itself", kind)
	}
	if kind == KindFlow {
		f, ok := body.(*Flow)
		if !ok {
			return fmt.Errorf("stream: flow body must be *Flow, got %T", body)
		}
		return w.Flow(f)
	}
	if err := w.begin(kind); err != nil {
		return err
	}
	w.counts[kind]++
	return w.enc.Encode(body)
}

// Group writes a group record.
func (w *Writer) Group(g *Group) error { return w.Record(KindGroup, g) }

// Note writes a note record.
func (w *Writer) Note(n *Note) error { return w.Record(KindNote, n) }

// Job writes a job record.
func (w *Writer) Job(j *Job) error { return w.Record(KindJob, j) }

// Collective writes a collective record.
func (w *Writer) Collective(c *Collective) error { return w.Record(KindCollective, c) }

// Topology writes the topology record; nodes and links are positional arrays.
func (w *Writer) Topology(t *Topology) error {
	if err := w.begin(KindTopology); err != nil {
		return err
	}
	w.counts[KindTopology]++
	e := w.enc
	if err := e.EncodeMapLen(8); err != nil {
		return err
	}
	e.EncodeString("family")
	e.EncodeString(t.Family)
	e.EncodeString("params")
	if err := e.Encode(t.Params); err != nil {
		return err
	}
	e.EncodeString("gpus")
	e.EncodeInt(int64(t.GPUs))
	e.EncodeString("gpus_per_server")
	e.EncodeInt(int64(t.GPUsPerServer))
	e.EncodeString("nvswitches_per_server")
	e.EncodeInt(int64(t.NVSwitchesPerServer))
	e.EncodeString("gpu_type")
	e.EncodeString(t.GPUType)
	e.EncodeString("nodes")
	e.EncodeArrayLen(len(t.Nodes))
	for i := range t.Nodes {
		n := &t.Nodes[i]
		e.EncodeArrayLen(7)
		e.EncodeInt(int64(n.ID))
		e.EncodeString(n.Kind)
		e.EncodeString(n.Role)
		e.EncodeInt(int64(n.Tier))
		e.EncodeInt(int64(n.Server))
		e.EncodeInt(int64(n.Group))
		e.EncodeInt(int64(n.Plane))
	}
	e.EncodeString("links")
	e.EncodeArrayLen(len(t.Links))
	for i := range t.Links {
		l := &t.Links[i]
		e.EncodeArrayLen(6)
		e.EncodeInt(int64(l.A))
		e.EncodeInt(int64(l.B))
		e.EncodeFloat64(l.BWbps)
		e.EncodeInt(l.LatencyPs)
		e.EncodeFloat64(l.ErrorRate)
		if err := e.EncodeString(l.Kind); err != nil {
			return err
		}
	}
	return nil
}

// Flow writes one flow record as a positional array. delay_ps is written
// only when it or pace_ps is non-zero, pace_ps only when non-zero.
func (w *Writer) Flow(f *Flow) error {
	if err := w.begin(KindFlow); err != nil {
		return err
	}
	w.flows++
	e := w.enc
	n := 10
	switch {
	case f.PacePs != 0:
		n = 12
	case f.DelayPs != 0:
		n = 11
	}
	e.EncodeArrayLen(n)
	e.EncodeInt(f.ID)
	e.EncodeInt(f.Collective)
	e.EncodeInt(int64(f.Src))
	e.EncodeInt(int64(f.Dst))
	e.EncodeInt(f.Size)
	e.EncodeArrayLen(len(f.Deps))
	for _, d := range f.Deps {
		e.EncodeInt(d)
	}
	e.EncodeInt(int64(f.Channel))
	e.EncodeInt(int64(f.Chunk))
	e.EncodeInt(int64(f.ChunkCount))
	err := e.EncodeString(f.ConnType)
	if n >= 11 {
		err = e.EncodeInt(f.DelayPs)
	}
	if n == 12 {
		err = e.EncodeInt(f.PacePs)
	}
	return err
}

// Forward copies the record the Reader is positioned on, unchanged. It is how
// a filter passes through what it does not consume.
func (w *Writer) Forward(r *Reader) error {
	raw, err := r.Raw()
	if err != nil {
		return err
	}
	return w.RawRecord(r.kind, raw)
}

// RawRecord writes a record whose body is already msgpack-encoded (a body
// kept from Reader.Raw).
func (w *Writer) RawRecord(kind string, body []byte) error {
	if kind == KindHeader || kind == KindTrailer {
		return fmt.Errorf("stream: %s records are written by the Writer itself", kind)
	}
	if err := w.begin(kind); err != nil {
		return err
	}
	if kind == KindFlow {
		w.flows++
	} else {
		w.counts[kind]++
	}
	_, err := w.bw.Write(body)
	return err
}

// Counts returns the number of records written so far, by kind.
func (w *Writer) Counts() map[string]int64 {
	c := make(map[string]int64, len(w.counts)+1)
	for k, v := range w.counts {
		c[k] = v
	}
	if w.flows > 0 {
		c[KindFlow] = w.flows
	}
	return c
}

// Close writes the trailer and flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	counts := w.Counts()
	if err := w.begin(KindTrailer); err != nil {
		return err
	}
	w.closed = true
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := w.enc
	e.EncodeMapLen(1)
	e.EncodeString("counts")
	e.EncodeMapLen(len(keys))
	for _, k := range keys {
		e.EncodeString(k)
		e.EncodeInt(counts[k])
	}
	return w.bw.Flush()
}

// Flush flushes buffered records without ending the stream.
func (w *Writer) Flush() error { return w.bw.Flush() }
