// Package pqcheck checks a Parquet file's column chunks before parquet-go
// decodes them, for the readers of formats/trace and formats/links: a
// corrupt or hostile page must not make a decoder allocate more than the
// file's bytes can expand to. It also holds Guard, which turns a fault
// inside parquet-go into an error.
package pqcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// zstdBlockMax is the most one zstd block decodes to (RFC 8878 3.1.1.2.3).
const zstdBlockMax = 128 << 10

// Footer checks a Parquet file's last 8 bytes before parquet-go opens it:
// the PAR1 magic (PARE, an encrypted footer, is refused too) and a footer
// length that fits in the file. parquet-go allocates the declared length,
// up to 4 GiB, before it reads the footer.
func Footer(ra io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes, too short for Parquet", size)
	}
	var b [8]byte
	if _, err := ra.ReadAt(b[:], size-8); err != nil {
		return fmt.Errorf("reading the footer: %v", err)
	}
	if string(b[4:]) != "PAR1" {
		return fmt.Errorf("the file ends in %q, not the PAR1 magic", b[4:])
	}
	if n := int64(binary.LittleEndian.Uint32(b[:4])); n > size-12 {
		return fmt.Errorf("its footer declares %d bytes in a file of %d", n, size)
	}
	return nil
}

// Pages reads, before parquet-go decodes anything, every page header of
// the column chunks of the given leaf columns, and refuses what would make
// the decoders allocate more than the file can hold: a codec other than
// ZSTD or UNCOMPRESSED (LZ4 doubles its buffer until a corrupt page fits),
// a chunk or page outside the file, an uncompressed page whose two sizes
// differ, and a zstd page that declares more bytes than its blocks can
// decode to (128 KiB per block at most; parquet-go allocates the declared
// size before decoding) or whose frames declare content sizes that do not
// add up to the page's. Errors start with name; rule ends the codec error
// ("a trace is ZSTD or UNCOMPRESSED (trace.md)").
func Pages(name string, ra io.ReaderAt, size int64, md *format.FileMetaData, leaves []int, rule string) error {
	for rg := range md.RowGroups {
		cols := md.RowGroups[rg].Columns
		for _, leaf := range leaves {
			if leaf >= len(cols) {
				return fmt.Errorf("%s: corrupt Parquet row group %d", name, rg)
			}
			cm := &cols[leaf].MetaData
			col := fmt.Sprintf("column %q, row group %d", pathName(cm.PathInSchema), rg)
			if cm.Codec != format.Uncompressed && cm.Codec != format.Zstd {
				return fmt.Errorf("%s: %s: compression %s; %s", name, col, cm.Codec, rule)
			}
			if c0 := md.RowGroups[0].Columns[leaf].MetaData.Codec; cm.Codec != c0 {
				return fmt.Errorf("%s: %s: compression %s, row group 0 has %s", name, col, cm.Codec, c0)
			}
			off := cm.DataPageOffset
			if cm.DictionaryPageOffset != 0 {
				off = cm.DictionaryPageOffset
			}
			if off < 0 || cm.TotalCompressedSize < 0 || off > size || cm.TotalCompressedSize > size-off {
				return fmt.Errorf("%s: %s: chunk at %d, %d bytes, outside the file's %d bytes", name, col, off, cm.TotalCompressedSize, size)
			}
			if err := Chunk(ra, off, cm.TotalCompressedSize, cm.Codec); err != nil {
				return fmt.Errorf("%s: %s: %s", name, col, err)
			}
		}
	}
	return nil
}

func pathName(p []string) string { return strings.Join(p, ".") }

// pageHeaderMax bounds a page header (its optional statistics included):
// parquet-go allocates what a header's length fields announce.
const pageHeaderMax = 1 << 20

// Chunk walks the pages of one column chunk, n bytes at off.
func Chunk(ra io.ReaderAt, off, n int64, codec format.CompressionCodec) error {
	var proto thrift.CompactProtocol
	buf := make([]byte, 4096)
	pos := int64(0)
	for page := 0; pos < n; page++ {
		var h format.PageHeader
		var hlen int64
		for window := int64(4096); ; window *= 16 {
			w := min(window, n-pos, pageHeaderMax)
			if int64(cap(buf)) < w {
				buf = make([]byte, w)
			}
			k, _ := ra.ReadAt(buf[:w], off+pos)
			h = format.PageHeader{}
			rd := proto.NewReaderFromBytes(buf[:k])
			err := thrift.NewDecoder(rd).Decode(&h)
			if err == nil {
				hlen = int64(rd.(interface{ BytesRead() int }).BytesRead())
				break
			}
			if w == n-pos || w == pageHeaderMax || int64(k) < w {
				return fmt.Errorf("page %d: unreadable page header at byte %d", page, off+pos)
			}
		}
		pos += hlen
		body := n - pos // bytes left in the chunk
		switch {
		case h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > body:
			return fmt.Errorf("page %d: compressed size %d, the chunk has %d bytes left", page, h.CompressedPageSize, body)
		case h.UncompressedPageSize < 0:
			return fmt.Errorf("page %d: uncompressed size %d", page, h.UncompressedPageSize)
		}
		levels := int64(0)
		compressed := codec == format.Zstd
		if v2 := h.DataPageHeaderV2; v2.Valid {
			levels = int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
			if levels < 0 || levels > int64(h.CompressedPageSize) || levels > int64(h.UncompressedPageSize) {
				return fmt.Errorf("page %d: %d bytes of levels in a page of %d", page, levels, h.CompressedPageSize)
			}
			if v2.V.IsCompressed.Valid && !v2.V.IsCompressed.V {
				compressed = false
			}
		}
		if !compressed {
			if h.UncompressedPageSize != h.CompressedPageSize {
				return fmt.Errorf("page %d: uncompressed page of %d bytes declares %d", page, h.CompressedPageSize, h.UncompressedPageSize)
			}
		} else {
			data := io.NewSectionReader(ra, off+pos+levels, int64(h.CompressedPageSize)-levels)
			if err := checkZstd(data, int64(h.UncompressedPageSize)-levels); err != nil {
				return fmt.Errorf("page %d: %s", page, err)
			}
		}
		pos += int64(h.CompressedPageSize)
	}
	return nil
}

// checkZstd walks the frames and block headers of a zstd page without
// decoding it: the page must declare no more than its blocks can decode to,
// and frames that declare their content size must declare the page's.
func checkZstd(r *io.SectionReader, declared int64) error {
	var most, stated int64 // what the blocks can hold, what the frames say
	allStated := true
	pos, end := int64(0), r.Size()
	hdr := make([]byte, zstd.HeaderMaxSize)
	for pos < end {
		k, _ := r.ReadAt(hdr, pos)
		var fh zstd.Header
		if err := fh.Decode(hdr[:k]); err != nil {
			return fmt.Errorf("zstd frame at byte %d: %v", pos, err)
		}
		if fh.Skippable {
			pos += int64(fh.HeaderSize) + int64(fh.SkippableSize)
			continue
		}
		pos += int64(fh.HeaderSize)
		blockMax := int64(zstdBlockMax)
		if fh.WindowSize > 0 && int64(fh.WindowSize) < blockMax {
			blockMax = int64(fh.WindowSize)
		}
		var frameMost int64
		for last := false; !last; {
			var b [3]byte
			if _, err := r.ReadAt(b[:], pos); err != nil {
				return fmt.Errorf("zstd block header at byte %d: truncated", pos)
			}
			v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			last = v&1 == 1
			bsize := int64(v >> 3)
			pos += 3
			switch (v >> 1) & 3 {
			case 0: // raw
				frameMost += bsize
				pos += bsize
			case 1: // RLE: one byte repeated
				frameMost += bsize
				pos++
			case 2:
				frameMost += blockMax
				pos += bsize
			default:
				return fmt.Errorf("zstd block at byte %d: reserved block type", pos-3)
			}
			if pos > end {
				return fmt.Errorf("zstd block at byte %d: %d bytes, past the page's end", pos-3, bsize)
			}
		}
		if fh.HasCheckSum {
			pos += 4
		}
		if fh.HasFCS {
			if int64(fh.FrameContentSize) > frameMost || fh.FrameContentSize > 1<<40 {
				return fmt.Errorf("zstd frame declares %d bytes, its blocks decode to at most %d", fh.FrameContentSize, frameMost)
			}
			stated += int64(fh.FrameContentSize)
		} else {
			allStated = false
		}
		most += frameMost
	}
	if pos > end {
		return errors.New("zstd frame past the page's end")
	}
	if declared > most {
		return fmt.Errorf("declares %d bytes uncompressed, its zstd blocks decode to at most %d", declared, most)
	}
	if allStated && stated != declared {
		return fmt.Errorf("declares %d bytes uncompressed, its zstd frames %d", declared, stated)
	}
	return nil
}

// Guard runs one call into parquet-go and turns a panic into an error.
// parquet-go validates most of its input, but not every corrupt encoding
// (page headers, RLE runs) is checked before use, and a decoding library's
// panic must not take down a command-line tool.
func Guard[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("corrupt input (decoder fault: %v)", p)
		}
	}()
	return f()
}

// RowGroups checks that every row group of f has a chunk per schema column
// and a row count of at least 0, and returns the rows they announce in
// all, refusing more than maxRows (0: no limit) before anything is
// allocated for them.
func RowGroups(name string, f *parquet.File, maxRows int64) (int64, error) {
	var total int64
	for i, rg := range f.RowGroups() {
		if len(rg.ColumnChunks()) != len(f.Schema().Columns()) || rg.NumRows() < 0 {
			return 0, fmt.Errorf("%s: corrupt Parquet row group %d", name, i)
		}
		total += rg.NumRows()
		if total < 0 || (maxRows > 0 && total > maxRows) {
			return 0, fmt.Errorf("%s: the row groups announce more than %d rows", name, maxRows)
		}
	}
	return total, nil
}

// WriteRows writes rows through pw a few thousand at a time (parquet-go
// buffers a call's rows whole) and closes it.
func WriteRows[T any](pw *parquet.GenericWriter[T], rows []T) error {
	for len(rows) > 0 {
		n := min(4096, len(rows))
		if _, err := pw.Write(rows[:n]); err != nil {
			return fmt.Errorf("parquet: %v", err)
		}
		rows = rows[n:]
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("parquet: %v", err)
	}
	return nil
}
