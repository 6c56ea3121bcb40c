package trace

import (
	"bufio"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/internal/outfile"
)

// Writer appends rows to a trace. Close flushes everything and writes the
// container's end (EOS marker, file footer); a trace that was not closed is
// truncated and readers reject it.
type Writer interface {
	Write(r *Row) error
	Close() error
}

// NewWriter starts a trace on w. Close does not close w.
//
// ArrowStream writes a record batch every 64Ki rows as they fill, so a
// downstream reader sees data while the simulation runs. ArrowFile and
// Parquet only need a plain io.Writer: the Arrow file buffers its batches
// (in memory, spilling to a temporary file past 64 MiB) until Close, and
// Parquet buffers one row group of 1Mi rows.
func NewWriter(w io.Writer, c Container, m Meta) (Writer, error) {
	keys, values, err := encodeMeta(m)
	if err != nil {
		return nil, err
	}
	var tw Writer
	switch c {
	case ArrowStream, ArrowFile:
		tw = newArrowWriter(w, c, keys, values)
	case Parquet:
		if tw, err = newParquetWriter(w, keys, values); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("trace: unknown container %v", c)
	}
	if m.Rows > 0 {
		tw = &countingWriter{Writer: tw, want: m.Rows}
	}
	return tw, nil
}

// countingWriter checks at Close that the rows written are the rows the
// metadata announced.
type countingWriter struct {
	Writer
	n, want int64
}

func (w *countingWriter) Write(r *Row) error {
	w.n++
	return w.Writer.Write(r)
}

func (w *countingWriter) Close() error {
	err := w.Writer.Close()
	if err == nil && w.n != w.want {
		err = fmt.Errorf("trace: %d rows written, the metadata announces %d", w.n, w.want)
	}
	return err
}

// Create starts a trace for the file at path in the container its
// extension names; Close completes it, closes the file and only then puts
// it at path (replacing what was there).
func Create(path string, m Meta) (Writer, error) {
	c, err := ContainerForPath(path)
	if err != nil {
		return nil, err
	}
	if _, _, err := encodeMeta(m); err != nil { // fail before touching the file system
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The trace is written under a temporary name beside path and renamed
	// when complete: a run killed mid-way leaves no file under path that
	// other readers (which may not check the end marker) take as whole.
	f, err := outfile.Create(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	w, err := NewWriter(f, c, m)
	if err != nil {
		f.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &fileWriter{Writer: w, f: f}, nil
}

// fileWriter completes the file Create opened after the trace is complete.
type fileWriter struct {
	Writer
	f *outfile.File
}

func (w *fileWriter) Write(r *Row) error {
	if err := w.Writer.Write(r); err != nil {
		return fmt.Errorf("%s: %w", w.f.Path(), err)
	}
	return nil
}

func (w *fileWriter) Close() error {
	if err := w.f.Finish(w.Writer.Close()); err != nil {
		return fmt.Errorf("%s: %w", w.f.Path(), err)
	}
	return nil
}

// Abort ends a trace that failed half-way: a file Create started is
// removed, never put under its name (a device or pipe it writes in place
// is left alone); writers that cannot abort are closed.
func Abort(w Writer) {
	if a, ok := w.(interface{ abort() }); ok {
		a.abort()
		return
	}
	w.Close()
}

func (w *fileWriter) abort() {
	w.Writer.Close()
	w.f.Abort()
}

// abort passes the abort on: the count no longer matters.
func (w *countingWriter) abort() { Abort(w.Writer) }

// arrowSchema builds the Arrow schema with the run's metadata.
func arrowSchema(keys, values []string) *arrow.Schema {
	fields := make([]arrow.Field, len(columns))
	for i, c := range columns {
		var t arrow.DataType
		switch c.kind {
		case kindInt64:
			t = arrow.PrimitiveTypes.Int64
		case kindInt32:
			t = arrow.PrimitiveTypes.Int32
		default:
			t = dictType
		}
		fields[i] = arrow.Field{Name: c.name, Type: t}
	}
	md := arrow.NewMetadata(keys, values)
	return arrow.NewSchema(fields, &md)
}

var dictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// strDict is a write-side dictionary that only ever grows, so an index
// handed out stays valid for the rest of the trace.
type strDict struct {
	idx  map[string]int32
	vals []string
	arr  arrow.Array // Arrow form of vals; nil when stale
	last int32       // index of the previous row's value (if vals is not empty)
}

func (d *strDict) index(s string) int32 {
	// Consecutive flows mostly share their collective's strings: compare
	// with the previous value before hashing.
	if int(d.last) < len(d.vals) && d.vals[d.last] == s {
		return d.last
	}
	if len(d.vals) <= smallDict { // most columns hold a handful of values: a scan beats hashing
		for i, v := range d.vals {
			if v == s {
				d.last = int32(i)
				return d.last
			}
		}
		d.last = d.add(s)
		return d.last
	}
	i, ok := d.idx[s]
	if !ok {
		i = d.add(s)
	}
	d.last = i
	return i
}

// smallDict is the dictionary size up to which index scans the values.
const smallDict = 8

func (d *strDict) add(s string) int32 {
	if d.idx == nil {
		d.idx = make(map[string]int32)
	}
	i := int32(len(d.vals))
	d.idx[s] = i
	d.vals = append(d.vals, s)
	if d.arr != nil {
		d.arr.Release()
		d.arr = nil
	}
	return i
}

// array returns the dictionary as an Arrow array. The same array is
// returned until a new value is added, so the IPC writer recognises an
// unchanged dictionary by identity and does not resend it.
func (d *strDict) array(mem memory.Allocator) arrow.Array {
	if d.arr == nil {
		b := array.NewStringBuilder(mem)
		b.AppendValues(d.vals, nil)
		d.arr = b.NewArray()
		b.Release()
	}
	return d.arr
}

// arrowWriter writes both Arrow containers.
//
// Dictionaries: every string column has one dictionary that only grows.
// In the stream each batch carries the whole dictionary so far; the IPC
// writer (WithDictionaryDeltas) sends only the new tail as a delta
// dictionary batch. The IPC file format forbids more than one dictionary
// per field in arrow-go's writer (and deltas in files are not read by every
// implementation), so the file writer spools batches of indices and writes
// them at Close against the final dictionary, which is then written once.
type arrowWriter struct {
	c      Container
	mem    memory.Allocator
	bw     *bufio.Writer
	schema *arrow.Schema
	cur    *colBatch
	dicts  [numStr]strDict

	sw    *ipc.Writer // ArrowStream
	pipe  *recordPipe // ArrowStream: full batches written on a goroutine of their own
	spool *spool      // ArrowFile: full batches waiting for Close

	err    error // sticky: a failed writer stays failed
	closed bool
}

func newArrowWriter(w io.Writer, c Container, keys, values []string) *arrowWriter {
	aw := &arrowWriter{
		c:      c,
		mem:    memory.DefaultAllocator,
		bw:     bufio.NewWriterSize(w, 1<<20),
		schema: arrowSchema(keys, values),
		cur:    newColBatch(batchRows),
	}
	if c == ArrowStream {
		aw.sw = ipc.NewWriter(aw.bw, ipc.WithSchema(aw.schema), ipc.WithAllocator(aw.mem), ipc.WithDictionaryDeltas(true))
		aw.pipe = newRecordPipe(aw)
	}
	return aw
}

// recordPipe writes the stream's full batches on a goroutine while the
// next one fills: encoding a batch and writing it out (the system calls
// of a pipe or file) were half of the trace's time after the run (0.6 of
// 1.26 s of CPU on a 2048-GPU AllToAll's 4.2 M rows), one after the other.
type recordPipe struct {
	full   chan pending
	free   chan *colBatch
	done   chan error
	failed atomic.Pointer[error] // the goroutine's first error, for send
}

// pending is a full batch with its dictionaries as of the batch: the
// filling side adds values meanwhile.
type pending struct {
	b     *colBatch
	dicts [numStr]arrow.Array
}

func newRecordPipe(w *arrowWriter) *recordPipe {
	p := &recordPipe{full: make(chan pending, 1), free: make(chan *colBatch, 1), done: make(chan error, 1)}
	p.free <- newColBatch(batchRows)
	go func() {
		var err error
		for b := range p.full {
			if err == nil {
				if err = w.writeRecord(w.sw, b.b, b.dicts); err == nil {
					err = w.bw.Flush() // let the consumer at the other end of a pipe see the batch now
				}
				if err != nil {
					p.failed.Store(&err)
				}
			}
			release(b.dicts)
			p.free <- b.b
		}
		p.done <- err
	}()
	return p
}

// send queues w's current batch and gives w an empty one. It returns the
// writing goroutine's first error once it has one (the goroutine drops
// the batches queued after it), so that Write fails soon after a full
// disk or a closed pipe rather than encoding the rest of the trace for
// nothing; close returns it too.
func (p *recordPipe) send(w *arrowWriter) error {
	d := w.dictArrays()
	for _, a := range d {
		a.Retain() // until written: add releases a dictionary it outgrows
	}
	p.full <- pending{w.cur, d}
	w.cur = <-p.free
	w.cur.n = 0
	return p.err() // a batch has been written (or failed) since the last check
}

func (p *recordPipe) err() error {
	if e := p.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *recordPipe) close() error {
	close(p.full)
	return <-p.done
}

// dictArrays returns each string column's dictionary as it stands.
func (w *arrowWriter) dictArrays() [numStr]arrow.Array {
	var d [numStr]arrow.Array
	for k := range d {
		d[k] = w.dicts[k].array(w.mem)
	}
	return d
}

func release(d [numStr]arrow.Array) {
	for _, a := range d {
		a.Release()
	}
}

func (w *arrowWriter) Write(r *Row) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("trace: write after Close")
	}
	b, i := w.cur, w.cur.n
	b.put(i, r)
	for k, s := range rowStrings(r) {
		b.str[k][i] = w.dicts[k].index(*s)
	}
	b.n++
	if b.n == batchRows {
		w.err = w.flush()
	}
	return w.err
}

// flush hands the full current batch on: to the stream's writing
// goroutine, or to the spool.
func (w *arrowWriter) flush() error {
	defer func() { w.cur.n = 0 }()
	if w.c == ArrowStream {
		return w.pipe.send(w)
	}
	if w.spool == nil {
		w.spool = &spool{}
	}
	next, err := w.spool.add(w.cur)
	w.cur = next
	return err
}

type recordWriter interface {
	Write(arrow.RecordBatch) error
}

// writeRecord wraps b's Go slices as Arrow arrays without copying and writes
// them with the dictionaries dicts; the IPC writer is done with the buffers
// when Write returns, so b can be refilled.
func (w *arrowWriter) writeRecord(rw recordWriter, b *colBatch, dicts [numStr]arrow.Array) error {
	n := b.n
	cols := make([]arrow.Array, len(columns))
	for i, c := range columns {
		switch c.kind {
		case kindInt64:
			cols[i] = primitive(arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(b.i64[c.slot][:n]), n)
		case kindInt32:
			cols[i] = primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(b.i32[c.slot][:n]), n)
		default:
			idx := primitive(arrow.PrimitiveTypes.Int32, arrow.Int32Traits.CastToBytes(b.str[c.slot][:n]), n)
			cols[i] = array.NewDictionaryArray(dictType, idx, dicts[c.slot])
			idx.Release()
		}
	}
	rec := array.NewRecordBatch(w.schema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	defer rec.Release()
	if err := rw.Write(rec); err != nil {
		return fmt.Errorf("trace: %s", errtext.OneLine(err))
	}
	return nil
}

func primitive(t arrow.DataType, buf []byte, n int) arrow.Array {
	d := array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func (w *arrowWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.pipe != nil {
		if err := w.pipe.close(); w.err == nil {
			w.err = err
		}
	}
	if w.err != nil {
		if w.spool != nil {
			w.spool.close()
		}
		return w.err
	}
	w.err = w.finish()
	if err := w.bw.Flush(); w.err == nil && err != nil {
		w.err = err
	}
	for k := range w.dicts {
		if a := w.dicts[k].arr; a != nil {
			a.Release()
			w.dicts[k].arr = nil
		}
	}
	return w.err
}

func (w *arrowWriter) finish() error {
	if w.c == ArrowStream {
		if w.cur.n > 0 {
			if err := w.writeRecord(w.sw, w.cur, w.dictArrays()); err != nil {
				return err
			}
		}
		if err := w.sw.Close(); err != nil {
			return fmt.Errorf("trace: %s", errtext.OneLine(err))
		}
		return nil
	}

	fw, err := ipc.NewFileWriter(w.bw, ipc.WithSchema(w.schema), ipc.WithAllocator(w.mem))
	if err != nil {
		return fmt.Errorf("trace: %s", errtext.OneLine(err))
	}
	if w.spool != nil {
		defer w.spool.close()
	}
	for _, b := range w.spool.batches() {
		if err := w.writeRecord(fw, b, w.dictArrays()); err != nil {
			return err
		}
	}
	if w.spool != nil && w.spool.f != nil {
		r, err := w.spool.reader()
		if err != nil {
			return err
		}
		b := newColBatch(batchRows)
		for {
			err := w.spool.readBatch(r, b)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if err := w.writeRecord(fw, b, w.dictArrays()); err != nil {
				return err
			}
		}
	}
	if w.cur.n > 0 {
		if err := w.writeRecord(fw, w.cur, w.dictArrays()); err != nil {
			return err
		}
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("trace: %s", errtext.OneLine(err))
	}
	return nil
}
