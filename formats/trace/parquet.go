package trace

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/formats/internal/pqcheck"
)

// pqRowGroupRows is the row group size (a variable for tests).
var pqRowGroupRows int64 = 1 << 20

const pqChunkRows = 1024 // rows handed to the GenericWriter per call

// pqZstdLevel is the zstd level of the writer (a variable for benchmarks).
var pqZstdLevel = zstd.SpeedFastest

type parquetWriter struct {
	pw     *parquet.GenericWriter[Row]
	buf    []Row
	n      int
	err    error
	closed bool
}

func newParquetWriter(w io.Writer, keys, values []string) (*parquetWriter, error) {
	opts := []parquet.WriterOption{
		// "schema" is the root name pyarrow writes; parquet-go would use the Go type name.
		parquet.NewSchema("schema", parquet.SchemaOf(Row{})),
		// zstd's fastest level: BenchmarkWriteParquetZstd writes about
		// 1.7 to 2 times as fast as at the default level, files 15% larger.
		parquet.Compression(&zstd.Codec{Level: pqZstdLevel}),
		parquet.MaxRowsPerRowGroup(pqRowGroupRows),
		parquet.WriteBufferSize(1 << 20),
	}
	for i := range keys {
		opts = append(opts, parquet.KeyValueMetadata(keys[i], values[i]))
	}
	return &parquetWriter{pw: parquet.NewGenericWriter[Row](w, opts...), buf: make([]Row, pqChunkRows)}, nil
}

func (w *parquetWriter) Write(r *Row) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("trace: write after Close")
	}
	w.buf[w.n] = *r
	w.n++
	if w.n == len(w.buf) {
		w.err = w.flush()
	}
	return w.err
}

func (w *parquetWriter) flush() error {
	n := w.n
	w.n = 0
	if _, err := w.pw.Write(w.buf[:n]); err != nil {
		return fmt.Errorf("trace: parquet: %s", errtext.OneLine(err))
	}
	clear(w.buf[:n]) // drop string references
	return nil
}

func (w *parquetWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err == nil && w.n > 0 {
		w.err = w.flush()
	}
	if w.err != nil {
		return w.err
	}
	if err := w.pw.Close(); err != nil {
		w.err = fmt.Errorf("trace: parquet: %s", errtext.OneLine(err))
	}
	return w.err
}

// parquetSource reads an opened and validated Parquet file column by
// column: one page cursor per column, each decoded page used in place.
// parquet-go's GenericReader rebuilds rows through reflection and copies
// every string: BenchmarkReadParquetGeneric is six to seven times slower
// than BenchmarkReadParquet.
type parquetSource struct {
	rowGroups []parquet.RowGroup
	leaf      [len(columns)]int // leaf column index of each column
	ncols     int               // columns the trace's schema version has
	rg        int               // current row group
	left      int64             // rows left in it
	cols      [len(columns)]pqCursor
}

// pqCursor walks the pages of one column chunk.
type pqCursor struct {
	pages parquet.Pages
	page  parquet.Page
	pos   int
	n     int
	i64   []int64
	i32   []int32 // int32 values, or dictionary indices of a string column
	strs  []string
	// string columns: copies of dictionary values, per dictionary
	dict     parquet.Dictionary
	dictVals []string
	// string columns: every distinct value seen, copied once
	intern  map[string]int32
	plain   []string
	scratch []int32
}

// openParquet opens a Parquet trace: it checks the metadata and every
// column's physical type and repetition before any row is decoded.
func openParquet(name string, ra io.ReaderAt, size int64) (*parquetSource, Meta, error) {
	f, err := guard(func() (*parquet.File, error) {
		if err := pqcheck.Footer(ra, size); err != nil {
			return nil, err
		}
		return parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	})
	if err != nil {
		return nil, Meta{}, fmt.Errorf("%s: not a readable Parquet file: %s", name, errtext.OneLine(err))
	}
	m, err := decodeMeta(name, f.Lookup)
	if err != nil {
		return nil, Meta{}, err
	}
	// Schema walks call into parquet-go, which panics on some node types
	// (a MAP column: "cannot call Kind on parquet MAP type"): recover them
	// into an error, as every other call into the library.
	type opened struct {
		src *parquetSource
		m   Meta
	}
	o, err := guard(func() (opened, error) {
		src, err := checkParquetSchema(name, f, m)
		if err != nil {
			return opened{}, err
		}
		return opened{src, m}, pqcheck.Pages(name, ra, size, f.Metadata(), src.leaf[:src.ncols], "a trace is ZSTD or UNCOMPRESSED (trace.md)")
	})
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+": ") { // a recovered fault
			err = fmt.Errorf("%s: %s", name, errtext.OneLine(err))
		}
		return nil, Meta{}, err
	}
	return o.src, o.m, nil
}

// checkParquetSchema checks every trace column's physical type and
// repetition and the row groups' shape.
func checkParquetSchema(name string, f *parquet.File, m Meta) (*parquetSource, error) {
	fields := map[string]parquet.Field{}
	for _, fl := range f.Schema().Fields() {
		if _, dup := fields[fl.Name()]; dup {
			return nil, fmt.Errorf("%s: duplicate column %q", name, fl.Name())
		}
		fields[fl.Name()] = fl
	}
	src := &parquetSource{rowGroups: f.RowGroups(), rg: -1, ncols: numColumnsOf(m.Schema)}
	for i, c := range columns[:src.ncols] {
		fl, ok := fields[c.name]
		if !ok {
			return nil, fmt.Errorf("%s: missing column %q", name, c.name)
		}
		if err := checkParquetColumn(fl, c); err != nil {
			return nil, fmt.Errorf("%s: column %q %s", name, c.name, err)
		}
		leaf, ok := f.Schema().Lookup(c.name)
		if !ok {
			return nil, fmt.Errorf("%s: missing column %q", name, c.name)
		}
		src.leaf[i] = leaf.ColumnIndex
	}
	for _, rg := range src.rowGroups {
		if len(rg.ColumnChunks()) != len(f.Schema().Columns()) || rg.NumRows() < 0 {
			return nil, fmt.Errorf("%s: corrupt Parquet row group", name)
		}
	}
	return src, nil
}

// checkParquetColumn accepts exactly the physical type of the contract, a
// REQUIRED leaf, with either no annotation or the matching one (a signed
// integer of the same width; STRING or none for byte arrays).
func checkParquetColumn(fl parquet.Field, c column) error {
	if !fl.Leaf() {
		return fmt.Errorf("is a group, want %s", c.kind)
	}
	t := fl.Type()
	var want parquet.Kind
	switch c.kind {
	case kindInt64:
		want = parquet.Int64
	case kindInt32:
		want = parquet.Int32
	default:
		want = parquet.ByteArray
	}
	if t.Kind() != want {
		return fmt.Errorf("has type %s, want %s", t.Kind(), want)
	}
	if !fl.Required() {
		return errors.New("is OPTIONAL or REPEATED; trace columns are REQUIRED (non-nullable)")
	}
	lt := t.LogicalType()
	if lt == nil || lt.Value == nil {
		return nil
	}
	switch v := lt.Value.(type) {
	case *format.IntType:
		bits := int8(64)
		if c.kind == kindInt32 {
			bits = 32
		}
		if c.kind != kindString && v.IsSigned && v.BitWidth == bits {
			return nil
		}
	case *format.StringType, *format.EnumType:
		if c.kind == kindString {
			return nil
		}
	}
	return fmt.Errorf("has logical type %s, want %s", lt, c.kind)
}

func (s *parquetSource) next(r *Row) error {
	for s.left == 0 {
		if err := s.nextRowGroup(); err != nil {
			return err
		}
	}
	for i := range s.cols[:s.ncols] {
		if s.cols[i].pos == s.cols[i].n {
			if err := s.cols[i].nextPage(columns[i]); err != nil {
				if err == io.EOF {
					err = fmt.Errorf("row group %d: column %q has fewer values than rows", s.rg, columns[i].name)
				}
				return err
			}
		}
	}
	s.left--
	c := &s.cols
	r.FlowID = c[colFlowID].int64()
	r.CollectiveID = c[colCollectiveID].int64()
	r.Src = c[colSrc].int32()
	r.Dst = c[colDst].int32()
	r.SizeBytes = c[colSizeBytes].int64()
	r.StartNs = c[colStartNs].int64()
	r.EndNs = c[colEndNs].int64()
	r.FctNs = c[colFctNs].int64()
	r.IdealFctNs = c[colIdealFctNs].int64()
	r.ConnType = c[colConnType].str()
	r.Channel = c[colChannel].int32()
	r.Chunk = c[colChunk].int32()
	r.Op = c[colOp].str()
	r.Algorithm = c[colAlgorithm].str()
	r.GroupType = c[colGroupType].str()
	r.CollSizeBytes = c[colCollSizeBytes].int64()
	r.NRanks = c[colNRanks].int32()
	if s.ncols < numV2Columns { // v1: the columns after nranks are absent
		setV1Defaults(r)
		return nil
	}
	r.Layer = c[colLayer].int32()
	r.LayerName = c[colLayerName].str()
	r.Phase = c[colPhase].str()
	r.Microbatch = c[colMicrobatch].int32()
	r.Stage = c[colStage].int32()
	r.Protocol = c[colProtocol].str()
	r.PredictedNs = c[colPredictedNs].int64()
	r.Status = c[colStatus].str()
	r.Job = ""
	if s.ncols > colJob {
		r.Job = c[colJob].str()
	}
	return nil
}

func (c *pqCursor) int64() int64 { v := c.i64[c.pos]; c.pos++; return v }
func (c *pqCursor) int32() int32 { v := c.i32[c.pos]; c.pos++; return v }
func (c *pqCursor) str() string  { v := c.strs[c.i32[c.pos]]; c.pos++; return v }

// nextRowGroup closes the current row group's cursors, checking that every
// column ended with it, and opens the next one's.
func (s *parquetSource) nextRowGroup() error {
	if s.rg >= 0 {
		for i := range s.cols[:s.ncols] {
			c := &s.cols[i]
			if c.pos != c.n {
				return fmt.Errorf("row group %d: column %q has more values than rows", s.rg, columns[i].name)
			}
			if err := c.nextPage(columns[i]); err != io.EOF {
				if err == nil {
					err = fmt.Errorf("row group %d: column %q has more values than rows", s.rg, columns[i].name)
				}
				return err
			}
			c.closePages()
		}
	}
	s.rg++
	if s.rg >= len(s.rowGroups) {
		return io.EOF
	}
	rg := s.rowGroups[s.rg]
	chunks := rg.ColumnChunks()
	for i := range s.cols[:s.ncols] {
		c := &s.cols[i]
		p, err := guard(func() (parquet.Pages, error) { return chunks[s.leaf[i]].Pages(), nil })
		if err != nil {
			return err
		}
		c.pages, c.pos, c.n = p, 0, 0
	}
	s.left = rg.NumRows()
	return nil
}

// nextPage decodes the column's next page and checks it; io.EOF when the
// column chunk has no more pages.
func (c *pqCursor) nextPage(col column) error {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.pos, c.n = 0, 0
	for c.n == 0 {
		page, err := guard(c.pages.ReadPage)
		if err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("column %q: %s", col.name, errtext.OneLine(err))
		}
		c.page = page
		if err := c.load(page, col); err != nil {
			return fmt.Errorf("column %q: %s", col.name, err)
		}
	}
	return nil
}

func (c *pqCursor) load(page parquet.Page, col column) error {
	if page.NumNulls() != 0 || len(page.DefinitionLevels()) != 0 || len(page.RepetitionLevels()) != 0 {
		return errors.New("page has nulls or levels; the column must be REQUIRED")
	}
	n64 := page.NumValues()
	data := page.Data()
	switch col.kind {
	case kindInt64:
		if data.Kind() != encoding.Int64 {
			return errors.New("corrupt page")
		}
		c.i64 = data.Int64()
		c.n = len(c.i64)
	case kindInt32:
		if data.Kind() != encoding.Int32 {
			return errors.New("corrupt page")
		}
		c.i32 = data.Int32()
		c.n = len(c.i32)
	default:
		if err := c.loadStrings(page, data); err != nil {
			return err
		}
	}
	if int64(c.n) != n64 {
		return fmt.Errorf("page holds %d values, its header says %d", c.n, n64)
	}
	return nil
}

func (c *pqCursor) loadStrings(page parquet.Page, data encoding.Values) error {
	if d := page.Dictionary(); d != nil {
		if data.Kind() != encoding.Int32 {
			return errors.New("corrupt dictionary page")
		}
		if d != c.dict {
			vals, err := byteArrays(d.Page().Data())
			if err != nil {
				return fmt.Errorf("dictionary: %s", err)
			}
			c.dictVals = make([]string, len(vals))
			for i, v := range vals {
				c.dictVals[i] = c.plain[c.internIdx(v)]
			}
			c.dict = d
		}
		c.i32 = data.Int32()
		for _, k := range c.i32 {
			if k < 0 || int(k) >= len(c.dictVals) {
				return fmt.Errorf("dictionary index %d out of range [0, %d)", k, len(c.dictVals))
			}
		}
		c.strs, c.n = c.dictVals, len(c.i32)
		return nil
	}
	// A plain (non-dictionary) page: parquet writers fall back to it when a
	// dictionary grows too large. The indices go to a slice of our own: the
	// previous page's buffers went back to parquet-go's pool.
	vals, err := byteArrays(data)
	if err != nil {
		return err
	}
	if cap(c.scratch) < len(vals) {
		c.scratch = make([]int32, len(vals))
	}
	c.i32 = c.scratch[:len(vals)]
	for i, v := range vals {
		c.i32[i] = c.internIdx(v)
	}
	c.strs, c.n = c.plain, len(vals)
	return nil
}

// internIdx returns the index in c.plain of a reader-owned copy of b,
// shared by equal values.
func (c *pqCursor) internIdx(b []byte) int32 {
	if k, ok := c.intern[string(b)]; ok {
		return k
	}
	if c.intern == nil {
		c.intern = map[string]int32{}
	}
	s := string(b)
	k := int32(len(c.plain))
	c.plain = append(c.plain, s)
	c.intern[s] = k
	return k
}

// byteArrays splits parquet-go's byte array values, checking the offsets.
func byteArrays(v encoding.Values) ([][]byte, error) {
	if v.Kind() != encoding.ByteArray {
		return nil, errors.New("corrupt page: not byte arrays")
	}
	data, offsets := v.ByteArray()
	if len(offsets) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(offsets)-1)
	for i := range out {
		j, k := offsets[i], offsets[i+1]
		if j > k || int(k) > len(data) {
			return nil, errors.New("corrupt byte array offsets")
		}
		out[i] = data[j:k]
	}
	return out, nil
}

func (c *pqCursor) closePages() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		c.pages.Close()
		c.pages = nil
	}
}

func (s *parquetSource) close() error {
	for i := range s.cols {
		s.cols[i].closePages()
	}
	return nil
}
