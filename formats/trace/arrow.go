package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
)

// maxMetaBytes caps one IPC message's metadata when the input's size is
// unknown (arrow-go's default); real metadata is a few kilobytes.
const maxMetaBytes = 64 << 20

// limits bounds IPC message sizes by the input size when it is known, so
// that a garbage length cannot make the reader allocate more than the
// input holds. From a pipe the body has no cap: msgReader grows its buffer
// only as bytes arrive.
func limits(size int64) (meta, body int64) {
	if size >= 0 {
		return size, size
	}
	return maxMetaBytes, math.MaxInt64
}

func sizeLimits(size int64) []ipc.Option {
	meta, body := limits(size)
	return []ipc.Option{ipc.WithMetadataSizeLimit(max(meta, 1)), ipc.WithBodySizeLimit(max(body, 1))}
}

func openArrowFile(name string, r ipc.ReadAtSeeker, size int64) (*Reader, error) {
	if err := verifyArrowFile(r, size); err != nil {
		return nil, fmt.Errorf("%s: not a readable Arrow IPC file: %s", name, errtext.OneLine(err))
	}
	opts := append(sizeLimits(size), ipc.WithAllocator(memory.DefaultAllocator))
	fr, err := guard(func() (*ipc.FileReader, error) { return ipc.NewFileReader(r, opts...) })
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Arrow IPC file: %s", name, errtext.OneLine(err))
	}
	src := &arrowSource{
		read: func() (arrow.RecordBatch, error) {
			// FileReader.Read keeps ownership: the batch stays valid until the next call.
			return guard(fr.Read)
		},
		closeFn: fr.Close,
	}
	m, err := src.init(name, fr.Schema())
	if err != nil {
		fr.Close()
		return nil, err
	}
	return &Reader{name: name, container: ArrowFile, meta: m, src: src}, nil
}

// verifyArrowFile checks the footer and the metadata of every block of an
// Arrow IPC file before arrow-go parses them (see fbverify.go).
func verifyArrowFile(r io.ReaderAt, size int64) error {
	const tailLen = 4 + 6 // footer length, "ARROW1"
	if size < 8+tailLen {
		return fmt.Errorf("file of %d bytes is too short (truncated?)", size)
	}
	tail := make([]byte, tailLen)
	if _, err := r.ReadAt(tail, size-tailLen); err != nil {
		return err
	}
	if string(tail[4:]) != "ARROW1" {
		return errors.New("no ARROW1 trailer at the end (truncated?)")
	}
	flen := int64(binary.LittleEndian.Uint32(tail))
	end := size - tailLen - flen // where the footer starts: blocks end here
	if flen <= 0 || end < 8 {
		return errCorruptMeta
	}
	footer := make([]byte, flen)
	if _, err := r.ReadAt(footer, end); err != nil {
		return err
	}
	blocks, err := verifyFooter(footer)
	if err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	for i, b := range blocks {
		if b.offset < 8 || b.metaLen < 8 || b.bodyLen < 0 || b.offset > end || int64(b.metaLen) > end-b.offset || b.bodyLen > end-b.offset-int64(b.metaLen) {
			return fmt.Errorf("block %d lies outside the file", i)
		}
		meta := make([]byte, b.metaLen)
		if _, err := r.ReadAt(meta, b.offset); err != nil {
			return err
		}
		prefix := 4 // pre-0.15 framing: length only
		if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
			prefix = 8
		}
		hdr, bodyLen, err := verifyMessage(meta[prefix:])
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		if hdr == hdrSchema || bodyLen != b.bodyLen {
			return fmt.Errorf("block %d: corrupt message", i)
		}
	}
	return nil
}

func openArrowStream(name string, r io.Reader, size int64) (*Reader, error) {
	meta, body := limits(size)
	mr := &msgReader{r: r, maxMeta: meta, maxBody: body, sizeKnown: size >= 0, refs: 1}
	sr, err := guard(func() (*ipc.Reader, error) {
		return ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(memory.DefaultAllocator))
	})
	if err != nil {
		if mr.n == 0 {
			return nil, fmt.Errorf("%s: empty input, not an Arrow or Parquet trace", name)
		}
		return nil, fmt.Errorf("%s: not an Arrow IPC stream, Arrow file or Parquet file: %s", name, errtext.OneLine(err))
	}
	src := &arrowSource{
		read: func() (arrow.RecordBatch, error) {
			ok, _ := guard(func() (bool, error) { return sr.Next(), nil })
			if ok {
				return sr.RecordBatch(), nil // valid until the next call
			}
			if err := sr.Err(); err != nil {
				return nil, err
			}
			return nil, io.EOF
		},
		closeFn: func() error { sr.Release(); return nil },
	}
	m, err := src.init(name, sr.Schema())
	if err != nil {
		sr.Release()
		return nil, err
	}
	return &Reader{name: name, container: ArrowStream, meta: m, src: src}, nil
}

// msgReader frames an Arrow IPC stream into messages for arrow-go,
// checking each message's metadata first (see fbverify.go). It also tells
// a complete stream from a cut one: arrow-go's own reader takes a stream
// that stops between two messages as complete, but a producer that died
// mid-run leaves exactly that, so a missing end-of-stream marker is an
// error here.
type msgReader struct {
	r                io.Reader
	maxMeta, maxBody int64
	sizeKnown        bool
	n                int64 // bytes consumed
	msg              *ipc.Message
	refs             int
}

func (m *msgReader) readFull(p []byte) error {
	n, err := io.ReadFull(m.r, p)
	m.n += int64(n)
	return err
}

func (m *msgReader) Message() (*ipc.Message, error) {
	if m.msg != nil { // arrow-go's convention: a message lives until the next
		m.msg.Release()
		m.msg = nil
	}
	var word [4]byte
	if err := m.readFull(word[:]); err != nil {
		if err == io.EOF {
			return nil, errTruncated
		}
		return nil, errCutMessage
	}
	length := binary.LittleEndian.Uint32(word[:])
	if length == 0xFFFFFFFF { // continuation marker, then the length
		if err := m.readFull(word[:]); err != nil {
			return nil, errCutMessage
		}
		length = binary.LittleEndian.Uint32(word[:])
	}
	if length == 0 { // end-of-stream marker: the input must end here too
		var b [1]byte
		if n, _ := io.ReadFull(m.r, b[:]); n > 0 {
			return nil, fmt.Errorf("bytes after the end-of-stream marker at byte %d: two traces run together, or a corrupt one", m.n)
		}
		return nil, io.EOF
	}
	if int64(length) > m.maxMeta {
		return nil, fmt.Errorf("message metadata of %d bytes exceeds the input or the %d-byte limit", length, m.maxMeta)
	}
	meta := make([]byte, length)
	if err := m.readFull(meta); err != nil {
		return nil, errCutMessage
	}
	_, bodyLen, err := verifyMessage(meta)
	if err != nil {
		return nil, err
	}
	if bodyLen > m.maxBody {
		return nil, fmt.Errorf("message body of %d bytes exceeds the input or the %d-byte limit", bodyLen, m.maxBody)
	}
	body, err := m.readBody(bodyLen)
	if err != nil {
		return nil, err
	}
	mb := memory.NewBufferBytes(meta)
	m.msg = ipc.NewMessage(mb, body)
	mb.Release()
	body.Release()
	return m.msg, nil
}

// readBody reads a message body. From an input of unknown size (a pipe)
// the buffer grows as bytes arrive, so a garbage length costs no more
// memory than the input actually delivers.
func (m *msgReader) readBody(n int64) (*memory.Buffer, error) {
	if !m.sizeKnown && n > 8<<20 {
		var b bytes.Buffer
		got, err := b.ReadFrom(io.LimitReader(m.r, n))
		m.n += got
		if err != nil || got != n {
			return nil, errCutMessage
		}
		return memory.NewBufferBytes(b.Bytes()), nil
	}
	body := memory.NewResizableBuffer(memory.DefaultAllocator) // 64-byte aligned, as arrow-go's own reader
	body.Resize(int(n))
	if err := m.readFull(body.Bytes()); err != nil {
		body.Release()
		return nil, errCutMessage
	}
	return body, nil
}

func (m *msgReader) Retain() { m.refs++ }

func (m *msgReader) Release() {
	if m.refs--; m.refs == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// arrowSource decodes rows from Arrow record batches of either container.
type arrowSource struct {
	read    func() (arrow.RecordBatch, error)
	closeFn func() error
	cols    [len(columns)]int // field index of each column
	ncols   int               // columns the trace's schema version has

	n, pos int
	i64    [numI64][]int64
	i32    [numI32][]int32
	str    [numStr]strColumn
}

// strColumn turns a dictionary or plain string column into indices into
// vals. vals are copies owned by the reader, so rows stay valid after the
// batch is released.
type strColumn struct {
	idx     []int32
	scratch []int32
	vals    []string
	dict    arrow.ArrayData   // dictionary vals came from (retained), for identity
	copies  map[string]string // dictionary columns: one copy per distinct value
	intern  map[string]int32  // plain columns: value -> index into vals
}

// init validates the schema and its metadata.
func (s *arrowSource) init(name string, sc *arrow.Schema) (Meta, error) {
	if sc == nil {
		return Meta{}, fmt.Errorf("%s: Arrow input has no schema", name)
	}
	md := sc.Metadata()
	m, err := decodeMeta(name, func(k string) (string, bool) {
		i := md.FindKey(k)
		if i < 0 {
			return "", false
		}
		return md.Values()[i], true
	})
	if err != nil {
		return m, err
	}
	s.ncols = numColumnsOf(m.Schema)
	for i, c := range columns[:s.ncols] {
		idx := sc.FieldIndices(c.name)
		switch {
		case len(idx) == 0:
			return m, fmt.Errorf("%s: missing column %q", name, c.name)
		case len(idx) > 1:
			return m, fmt.Errorf("%s: duplicate column %q", name, c.name)
		}
		if err := checkArrowType(sc.Field(idx[0]).Type, c); err != nil {
			return m, fmt.Errorf("%s: column %q %s", name, c.name, err)
		}
		s.cols[i] = idx[0]
	}
	return m, nil
}

func checkArrowType(t arrow.DataType, c column) error {
	ok := false
	switch c.kind {
	case kindInt64:
		ok = t.ID() == arrow.INT64
	case kindInt32:
		ok = t.ID() == arrow.INT32
	default:
		ok = isStringType(t)
		if dt, isDict := t.(*arrow.DictionaryType); isDict {
			ok = arrow.IsInteger(dt.IndexType.ID()) && isStringType(dt.ValueType)
		}
	}
	if !ok {
		want := c.kind.String()
		if c.kind == kindString {
			want = "utf8 or dictionary<int, utf8>"
		}
		return fmt.Errorf("has type %s, want %s", t, want)
	}
	return nil
}

func isStringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return true
	}
	return false
}

func (s *arrowSource) next(r *Row) error {
	for s.pos == s.n {
		rec, err := s.read()
		if err != nil {
			return err
		}
		if err := s.load(rec); err != nil {
			return err
		}
	}
	i := s.pos
	s.pos++
	r.FlowID = s.i64[i64FlowID][i]
	r.CollectiveID = s.i64[i64CollectiveID][i]
	r.SizeBytes = s.i64[i64SizeBytes][i]
	r.StartNs = s.i64[i64StartNs][i]
	r.EndNs = s.i64[i64EndNs][i]
	r.FctNs = s.i64[i64FctNs][i]
	r.IdealFctNs = s.i64[i64IdealFctNs][i]
	r.CollSizeBytes = s.i64[i64CollSizeBytes][i]
	r.Src = s.i32[i32Src][i]
	r.Dst = s.i32[i32Dst][i]
	r.Channel = s.i32[i32Channel][i]
	r.Chunk = s.i32[i32Chunk][i]
	r.NRanks = s.i32[i32NRanks][i]
	r.ConnType = s.str[strConnType].value(i)
	r.Op = s.str[strOp].value(i)
	r.Algorithm = s.str[strAlgorithm].value(i)
	r.GroupType = s.str[strGroupType].value(i)
	if s.ncols < numV2Columns {
		setV1Defaults(r)
		return nil
	}
	r.Layer = s.i32[i32Layer][i]
	r.LayerName = s.str[strLayerName].value(i)
	r.Phase = s.str[strPhase].value(i)
	r.Microbatch = s.i32[i32Microbatch][i]
	r.Stage = s.i32[i32Stage][i]
	r.Protocol = s.str[strProtocol].value(i)
	r.PredictedNs = s.i64[i64PredictedNs][i]
	r.Status = s.str[strStatus].value(i)
	r.Job = ""
	if s.ncols > colJob {
		r.Job = s.str[strJob].value(i)
	}
	return nil
}

func (c *strColumn) value(i int) string { return c.vals[c.idx[i]] }

// load checks one record batch and points the column views at it. After
// it succeeds every index used by next is in range.
func (s *arrowSource) load(rec arrow.RecordBatch) error {
	s.n, s.pos = 0, 0
	if rec == nil {
		return errors.New("corrupt input: empty record batch")
	}
	rows := rec.NumRows()
	if rows < 0 || int64(int(rows)) != rows {
		return fmt.Errorf("record batch has invalid row count %d", rows)
	}
	n := int(rows)
	if int(rec.NumCols()) != len(rec.Schema().Fields()) {
		return errors.New("record batch column count differs from its schema")
	}
	for i, c := range columns[:s.ncols] {
		a := rec.Column(s.cols[i])
		if a.Len() != n {
			return fmt.Errorf("column %q has %d values in a batch of %d rows", c.name, a.Len(), n)
		}
		if nulls, err := nullCount(a.Data()); err != nil || nulls != 0 {
			if err != nil {
				return fmt.Errorf("column %q: %s", c.name, err)
			}
			return fmt.Errorf("column %q has %d nulls; trace columns are non-nullable", c.name, nulls)
		}
		var ok bool
		switch c.kind {
		case kindInt64:
			var v *array.Int64
			if v, ok = a.(*array.Int64); ok {
				s.i64[c.slot] = v.Int64Values()
				ok = len(s.i64[c.slot]) == n
			}
		case kindInt32:
			var v *array.Int32
			if v, ok = a.(*array.Int32); ok {
				s.i32[c.slot] = v.Int32Values()
				ok = len(s.i32[c.slot]) == n
			}
		default:
			if err := s.str[c.slot].load(a, n); err != nil {
				return fmt.Errorf("column %q: %s", c.name, err)
			}
			ok = true
		}
		if !ok {
			return fmt.Errorf("column %q: corrupt %s data", c.name, a.DataType())
		}
	}
	s.n = n
	return nil
}

func (c *strColumn) load(a arrow.Array, n int) error {
	if d, ok := a.(*array.Dictionary); ok {
		if dd := d.Data().Dictionary(); dd == nil || dd != c.dict {
			// Check the buffers before arrow-go builds the dictionary
			// array: its constructor panics on bad offsets.
			if err := validateStrings(dd); err != nil {
				return fmt.Errorf("dictionary: %s", err)
			}
			if err := c.setDict(d.Dictionary()); err != nil {
				return err
			}
		}
		idx, err := indices(d.Indices(), n, len(c.vals), &c.scratch)
		if err != nil {
			return err
		}
		c.idx = idx
		return nil
	}
	// A plain string column: intern values into a dictionary that grows
	// across batches, so repeated strings share one copy.
	if err := validateStrings(a.Data()); err != nil {
		return err
	}
	if c.intern == nil {
		c.intern = map[string]int32{}
	}
	if cap(c.scratch) < n {
		c.scratch = make([]int32, n)
	}
	idx := c.scratch[:n]
	get := a.(interface{ Value(int) string })
	for i := range n {
		v := get.Value(i)
		k, ok := c.intern[v]
		if !ok {
			v = strings.Clone(v)
			k = int32(len(c.vals))
			c.intern[v] = k
			c.vals = append(c.vals, v)
		}
		idx[i] = k
	}
	c.idx = idx
	return nil
}

// setDict copies a new dictionary's values. It runs only when the
// dictionary changes (a delta, a replacement), not for every batch.
func (c *strColumn) setDict(dict arrow.Array) error {
	if nulls, err := nullCount(dict.Data()); err != nil || nulls != 0 {
		return errors.New("dictionary holds nulls")
	}
	if c.copies == nil {
		c.copies = map[string]string{}
	}
	get := dict.(interface{ Value(int) string })
	vals := make([]string, dict.Len())
	for i := range vals {
		v := get.Value(i)
		cp, ok := c.copies[v] // a delta repeats every earlier value
		if !ok {
			cp = strings.Clone(v)
			c.copies[cp] = cp
		}
		vals[i] = cp
	}
	c.vals = vals
	if c.dict != nil {
		c.dict.Release()
	}
	c.dict = dict.Data()
	c.dict.Retain()
	return nil
}

// nullCount returns the number of nulls without trusting the stored count:
// a negative count in the IPC metadata makes arrow-go count the validity
// bitmap, and it panics when that bitmap is missing or short.
func nullCount(d arrow.ArrayData) (int, error) {
	bufs := d.Buffers()
	if len(bufs) == 0 || bufs[0] == nil || d.Len() == 0 {
		return 0, nil // no validity bitmap: every value is valid
	}
	if need := (d.Offset() + d.Len() + 7) / 8; d.Offset() < 0 || bufs[0].Len() < need {
		return 0, errors.New("corrupt validity bitmap")
	}
	return d.NullN(), nil
}

// validateStrings checks a string array's offsets so that neither
// arrow-go's constructor nor Value can slice outside the data buffer.
// arrow-go checks the offset count and the last offset (by panicking) when
// it builds the array, but not the offsets in between; its ValidateFull
// (v18.8.0) itself panics on them.
func validateStrings(d arrow.ArrayData) error {
	if d == nil {
		return errors.New("missing")
	}
	n := d.Len()
	bufs := d.Buffers()
	if n < 0 || len(bufs) != 3 {
		return errors.New("corrupt string data")
	}
	if n == 0 {
		return nil
	}
	if bufs[1] == nil {
		return errors.New("corrupt string data: no offsets")
	}
	dataLen := 0
	if bufs[2] != nil {
		dataLen = bufs[2].Len()
	}
	switch d.DataType().ID() {
	case arrow.STRING:
		return checkOffsets(arrow.Int32Traits.CastFromBytes(bufs[1].Bytes()), d.Offset(), n, dataLen)
	case arrow.LARGE_STRING:
		return checkOffsets(arrow.Int64Traits.CastFromBytes(bufs[1].Bytes()), d.Offset(), n, dataLen)
	}
	return fmt.Errorf("has type %s, want utf8 or large_utf8", d.DataType())
}

func checkOffsets[T int32 | int64](offs []T, off, n, dataLen int) error {
	if off < 0 || len(offs) < off+n+1 {
		return errors.New("corrupt string data: offsets buffer too short")
	}
	o := offs[off : off+n+1]
	if o[0] < 0 || int64(o[n]) > int64(dataLen) {
		return errors.New("corrupt string data: offsets outside the data buffer")
	}
	for i := 1; i < len(o); i++ {
		if o[i] < o[i-1] {
			return fmt.Errorf("corrupt string data: offsets decrease at value %d", i-1)
		}
	}
	return nil
}

// indices returns dictionary indices as int32, checked against the
// dictionary length. int32 indices are used in place.
func indices(a arrow.Array, n, dictLen int, scratch *[]int32) ([]int32, error) {
	if nulls, err := nullCount(a.Data()); a.Len() != n || err != nil || nulls != 0 {
		return nil, errors.New("corrupt dictionary indices")
	}
	if v, ok := a.(*array.Int32); ok {
		idx := v.Int32Values()
		if len(idx) != n {
			return nil, errors.New("corrupt dictionary indices")
		}
		for _, k := range idx {
			if k < 0 || int(k) >= dictLen {
				return nil, fmt.Errorf("dictionary index %d out of range [0, %d)", k, dictLen)
			}
		}
		return idx, nil
	}
	if cap(*scratch) < n {
		*scratch = make([]int32, n)
	}
	out := (*scratch)[:n]
	var err error
	switch v := a.(type) {
	case *array.Int8:
		err = widen(v.Int8Values(), out, dictLen)
	case *array.Uint8:
		err = widen(v.Uint8Values(), out, dictLen)
	case *array.Int16:
		err = widen(v.Int16Values(), out, dictLen)
	case *array.Uint16:
		err = widen(v.Uint16Values(), out, dictLen)
	case *array.Uint32:
		err = widen(v.Uint32Values(), out, dictLen)
	case *array.Int64:
		err = widen(v.Int64Values(), out, dictLen)
	case *array.Uint64:
		err = widen(v.Uint64Values(), out, dictLen)
	default:
		err = fmt.Errorf("dictionary index type %s is not an integer", a.DataType())
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func widen[T int8 | uint8 | int16 | uint16 | uint32 | int64 | uint64](in []T, out []int32, dictLen int) error {
	if len(in) != len(out) {
		return errors.New("corrupt dictionary indices")
	}
	for i, k := range in {
		// Compare in uint64 so negative and huge values both fail.
		if uint64(int64(k)) >= uint64(dictLen) {
			return fmt.Errorf("dictionary index %d out of range [0, %d)", k, dictLen)
		}
		out[i] = int32(k)
	}
	return nil
}

func (s *arrowSource) close() error {
	for k := range s.str {
		if d := s.str[k].dict; d != nil {
			d.Release()
			s.str[k].dict = nil
		}
	}
	s.n, s.pos = 0, 0
	return s.closeFn()
}
