package trace

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/fabricsim/fabricsim/formats/internal/pqcheck"
)

// parquetWith writes n test rows as a trace with parquet-go's writer and
// the given options (compression, page version) on top of the trace's own.
func parquetWith(t *testing.T, n int, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	for k, v := range goodKV() {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	w := parquet.NewGenericWriter[Row](&buf, append([]parquet.WriterOption{parquet.NewSchema("schema", parquet.SchemaOf(Row{}))}, opts...)...)
	if _, err := w.Write(genRows(n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Only the codecs trace.md names are read; the others are refused before a
// page is decoded, naming the column and the codec. LZ4 doubles its buffer
// until a corrupt page fits: a 4.4 KB file took 60 s and 5.9 GB.
func TestParquetCodecs(t *testing.T) {
	for _, c := range []struct {
		codec parquet.WriterOption
		name  string
	}{{parquet.Compression(&parquet.Lz4Raw), "LZ4_RAW"}, {parquet.Compression(&parquet.Snappy), "SNAPPY"}, {parquet.Compression(&parquet.Gzip), "GZIP"}} {
		err := readErr(t, "run.parquet", parquetWith(t, 100, c.codec))
		if err == nil || !strings.Contains(err.Error(), `column "flow_id", row group 0: compression `+c.name+"; a trace is ZSTD or UNCOMPRESSED") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// A corrupt LZ4 page with a matching checksum (what made the LZ4
	// decoder double its buffer without end): refused as fast, allocating
	// next to nothing.
	data := corruptPage(t, parquetWith(t, 3000, parquet.Compression(&parquet.Lz4Raw)))
	var err error
	if n := allocs(func() { err = readErr(t, "lz4.parquet", data) }); n > 64<<20 {
		t.Errorf("refusing a corrupt LZ4 page allocated %d MB", n>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "LZ4_RAW") {
		t.Errorf("corrupt LZ4: %v", err)
	}
	// ZSTD (data pages v1 and v2) and UNCOMPRESSED read back what was written.
	for _, opts := range [][]parquet.WriterOption{
		{parquet.Compression(&parquet.Uncompressed)},
		{parquet.Compression(&parquet.Uncompressed), parquet.DataPageVersion(2)},
		{parquet.Compression(&parquet.Zstd), parquet.DataPageVersion(2)},
		{parquet.Compression(&parquet.Zstd), parquet.PageBufferSize(4096)},
	} {
		r, err := NewReader(bytes.NewReader(parquetWith(t, 5000, opts...)), "ok.parquet")
		_, rows := readBack(t, r, err)
		compareRows(t, rows, genRows(5000))
	}
}

// A zstd page is refused, before anything is allocated for it, when its
// header declares more than its blocks can decode to (parquet-go allocates
// the declared size first), when the frames state another content size
// than the header, and when its compressed size runs past its chunk.
func TestParquetDeclaredSizes(t *testing.T) {
	valid := parquetWith(t, 3000, parquet.Compression(&parquet.Zstd))
	cases := []struct {
		edit func(h *format.PageHeader)
		want string
	}{
		{func(h *format.PageHeader) { h.UncompressedPageSize = maxSameLength(h.UncompressedPageSize) }, "its zstd blocks decode to at most"},
		{func(h *format.PageHeader) { h.UncompressedPageSize++ }, "its zstd frames"},
		{func(h *format.PageHeader) { h.CompressedPageSize = maxSameLength(h.CompressedPageSize) }, "bytes left"},
	}
	for _, c := range cases {
		data := rewriteFirstPage(t, valid, c.edit)
		var rerr error
		if n := allocs(func() { rerr = readErr(t, "bad.parquet", data) }); n > 64<<20 {
			t.Errorf("%s: refusing allocated %d MB", c.want, n>>20)
		}
		if rerr == nil || !strings.Contains(rerr.Error(), `column "flow_id", row group 0: page 0: `) || !strings.Contains(rerr.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, rerr)
		}
	}
	// The same checks on a page built by hand: a 5-byte page declaring 2 GiB.
	var h format.PageHeader
	h.Type = format.DataPage
	h.UncompressedPageSize = 1<<31 - 1
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x09, 0x00, 0x00, 'x'} // one raw block of "x"
	h.CompressedPageSize = int32(len(frame))
	enc, _ := thrift.Marshal(new(thrift.CompactProtocol), &h)
	chunk := append(enc, frame...)
	err := pqcheck.Chunk(bytes.NewReader(chunk), 0, int64(len(chunk)), format.Zstd)
	if err == nil || !strings.Contains(err.Error(), "declares 2147483647 bytes uncompressed, its zstd blocks decode to at most 1") {
		t.Errorf("2 GiB page of one byte: %v", err)
	}
}

// corruptPage garbles the first bytes of column flow_id's first page and
// updates the page's checksum, so that only the decoder can notice.
func corruptPage(t *testing.T, valid []byte) []byte {
	t.Helper()
	for key := byte(1); key != 0; key++ {
		data := bytes.Clone(valid)
		page := firstPage(t, data)
		n := int(page.h.CompressedPageSize)
		for i := page.body; i < page.body+min(16, n); i++ {
			data[i] ^= key
		}
		page.h.CRC = int32(crc32.ChecksumIEEE(data[page.body : page.body+n]))
		enc, err := thrift.Marshal(new(thrift.CompactProtocol), &page.h)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) == page.body-page.off { // same length: nothing moves
			copy(data[page.off:], enc)
			return data
		}
	}
	t.Fatal("no corruption keeps the page header's length")
	return nil
}

// rewriteFirstPage edits the header of column flow_id's first page, which
// must keep its encoded length.
func rewriteFirstPage(t *testing.T, valid []byte, edit func(*format.PageHeader)) []byte {
	t.Helper()
	data := bytes.Clone(valid)
	page := firstPage(t, data)
	edit(&page.h)
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), &page.h)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != page.body-page.off {
		t.Fatalf("re-encoded page header has %d bytes, was %d", len(enc), page.body-page.off)
	}
	copy(data[page.off:], enc)
	return data
}

// maxSameLength is the largest int32 whose zigzag varint is as long as v's.
func maxSameLength(v int32) int32 {
	n := binary.PutUvarint(make([]byte, 10), uint64(v)<<1)
	return int32((uint64(1)<<(7*n) - 1) >> 1)
}

type pageAt struct {
	off, body int // where the header and the page data start
	h         format.PageHeader
}

// firstPage finds the first page of column flow_id.
func firstPage(t *testing.T, data []byte) pageAt {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	cm := f.Metadata().RowGroups[0].Columns[0].MetaData
	off := int(cm.DataPageOffset)
	if cm.DictionaryPageOffset != 0 {
		off = int(cm.DictionaryPageOffset)
	}
	p := pageAt{off: off}
	rd := new(thrift.CompactProtocol).NewReaderFromBytes(data[off:])
	if err := thrift.NewDecoder(rd).Decode(&p.h); err != nil {
		t.Fatal(err)
	}
	p.body = off + rd.(interface{ BytesRead() int }).BytesRead()
	return p
}

// allocs is what f allocates, in bytes.
func allocs(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A footer length past the file's start is refused before parquet-go
// allocates it (it took the declared length, up to 4 GiB, first).
func TestParquetFooterLength(t *testing.T) {
	valid := parquetWith(t, 10)
	data := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(data[len(data)-8:], 0xfffffff0)
	var err error
	if n := allocs(func() { err = readErr(t, "footer.parquet", data) }); n > 64<<20 {
		t.Errorf("refusing a 4 GiB footer allocated %d MB", n>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "footer.parquet: not a readable Parquet file: its footer declares 4294967280 bytes in a file of") {
		t.Errorf("4 GiB footer: %v", err)
	}
}
