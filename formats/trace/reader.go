package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
)

// Reader reads a trace row by row; rows are decoded a batch at a time.
type Reader struct {
	name      string
	container Container
	meta      Meta
	src       source
	closer    io.Closer // the file Open opened
	err       error     // sticky
	rows      int64     // rows read so far
}

// source is one container's row decoder. Errors it returns do not carry
// the file name yet.
type source interface {
	next(r *Row) error
	close() error
}

var (
	magicArrowFile = []byte("ARROW1")
	magicParquet   = []byte("PAR1")
)

// Open opens the trace at path, detecting the container from its first
// bytes: "ARROW1" is an Arrow IPC file, "PAR1" Parquet, anything else is
// read as an Arrow IPC stream.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, PathError(path, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	if !st.Mode().IsRegular() { // a FIFO or device cannot seek: treat it like stdin
		r, err := NewReader(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		r.closer = f
		return r, nil
	}
	var head [8]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("%s: %s", path, errtext.OneLine(err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %s", path, errtext.OneLine(err))
	}
	var r *Reader
	switch Detect(head[:n]) {
	case ArrowFile:
		r, err = openArrowFile(path, f, st.Size())
	case Parquet:
		r, err = newParquetReader(path, f, st.Size())
	default:
		r, err = openArrowStream(path, bufio.NewReaderSize(f, bufSize(st.Size())), st.Size())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads a trace from r (typically stdin), called name in
// errors. The container is detected from the first bytes as in Open; an
// Arrow file or Parquet file needs random access, so it is read into
// memory first. Close does not close r.
func NewReader(r io.Reader, name string) (*Reader, error) {
	size := knownSize(r)
	br := bufio.NewReaderSize(r, bufSize(size))
	head, err := br.Peek(8)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %s", name, errtext.OneLine(err))
	}
	switch c := Detect(head); c {
	case ArrowFile, Parquet:
		var b bytes.Buffer
		if size > 0 {
			b.Grow(int(size) + bytes.MinRead) // one allocation when the size is known
		}
		if _, err := b.ReadFrom(br); err != nil {
			return nil, fmt.Errorf("%s: %s", name, errtext.OneLine(err))
		}
		data := b.Bytes()
		if c == ArrowFile {
			return openArrowFile(name, bytes.NewReader(data), int64(len(data)))
		}
		return newParquetReader(name, bytes.NewReader(data), int64(len(data)))
	}
	return openArrowStream(name, br, size)
}

// PathError words an *os.PathError as "<path>: <reason>", so that every
// error starts with the file name; errors.Is still sees the cause.
func PathError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// bufSize sizes the read buffer: 1 MiB, or less for a small input.
func bufSize(size int64) int {
	if size >= 0 && size < 1<<20 {
		return int(size) + 16
	}
	return 1 << 20
}

// Detect tells a trace's container from its first bytes (8 are enough),
// as Open and NewReader do: "ARROW1" is an Arrow IPC file, "PAR1" Parquet,
// anything else is read as an Arrow IPC stream.
func Detect(head []byte) Container {
	switch {
	case bytes.HasPrefix(head, magicArrowFile):
		return ArrowFile
	case bytes.HasPrefix(head, magicParquet):
		return Parquet
	}
	return ArrowStream
}

// knownSize returns how many bytes r can still deliver, or -1. It lets the
// stream reader bound message sizes by the input's size, so garbage
// lengths cannot make it allocate more than the input holds.
func knownSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		return int64(v.Len())
	case *os.File:
		st, err := v.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return -1
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		return st.Size() - off
	}
	return -1
}

func newParquetReader(name string, ra io.ReaderAt, size int64) (*Reader, error) {
	src, m, err := openParquet(name, ra, size)
	if err != nil {
		return nil, err
	}
	return &Reader{name: name, container: Parquet, meta: m, src: src}, nil
}

// Container returns the container the trace was read as.
func (r *Reader) Container() Container { return r.container }

// Columns returns the names of the columns the trace's schema version
// has: the 17 of v1 or the 25 of v2.
func (r *Reader) Columns() []string { return ColumnNames()[:numColumnsOf(r.meta.Schema)] }

// Meta returns the trace metadata, validated when the trace was opened.
func (r *Reader) Meta() Meta { return r.meta }

// Next reads the next row into row. It returns io.EOF after the last row;
// any other error is single-line and starts with the trace's name.
func (r *Reader) Next(row *Row) error {
	if r.err != nil {
		return r.err
	}
	if r.src == nil {
		return fmt.Errorf("%s: read after Close", r.name)
	}
	err := r.src.next(row)
	switch {
	case err == nil:
		r.rows++
	case err == io.EOF:
		if r.meta.Rows > 0 && r.rows != r.meta.Rows {
			err = fmt.Errorf("%s: %d rows, the metadata (%s) announces %d: the trace was cut short or is corrupt", r.name, r.rows, KeyRows, r.meta.Rows)
		}
		r.err = err
	default:
		err = fmt.Errorf("%s: %s", r.name, errtext.OneLine(err))
		r.err = err
	}
	return err
}

// Close releases the decoder and closes the file Open opened.
func (r *Reader) Close() error {
	var err error
	if r.src != nil {
		err = r.src.close()
		r.src = nil
	}
	if r.closer != nil {
		if cerr := r.closer.Close(); err == nil {
			err = cerr
		}
		r.closer = nil
	}
	return err
}

// ReadAll reads the remaining rows of r. It does not close r.
func ReadAll(r *Reader) ([]Row, error) {
	var rows []Row
	for {
		var row Row
		err := r.Next(&row)
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
}

// guard runs one call into arrow-go or parquet-go and turns a panic into an
// error. Both libraries validate most of their input, but not every corrupt
// encoding (flatbuffer tables, page headers, RLE runs) is checked before
// use, and a decoding library's panic must not take down a command-line
// tool. Our own checks come first (schema, metadata, column types,
// lengths, nulls, dictionary indices); guard is only the last line for
// faults inside the libraries.
func guard[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("corrupt input (decoder fault: %v)", p)
		}
	}()
	return f()
}

var (
	errTruncated  = errors.New("truncated Arrow stream: input ended without the end-of-stream marker")
	errCutMessage = errors.New("truncated Arrow stream: input ended inside a message")
)
