package trace

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/fabricsim/fabricsim/internal/outfile"
)

// spoolMemLimit is how much the Arrow file writer keeps in memory before it
// moves its spool to a temporary file (about 670k rows).
var spoolMemLimit = 64 << 20

// spool keeps full batches of the Arrow file writer until Close: the
// batches themselves while they fit in spoolMemLimit, then raw
// native-endian column buffers in a temporary file (read back only by
// this process). Held as they are, a batch is neither copied into a
// growing buffer nor read back out of it: on SimAI's 128-GPU cases that
// was a third of writing the trace.
type spool struct {
	held  []*colBatch // in memory, in order (none once the file is used)
	bytes int         // held's bytes
	f     *os.File
	fw    *bufio.Writer
	name  string // set while the temporary file still has to be removed
}

// batchBytes is what a batch of n rows holds.
func batchBytes(n int) int { return n * (8*numI64 + 4*numI32 + 4*numStr) }

// add takes b, a full batch, and returns the batch to fill next: b itself
// once it has gone to the file, else a new one.
func (s *spool) add(b *colBatch) (*colBatch, error) {
	if s.f == nil && s.bytes+batchBytes(b.n) <= spoolMemLimit {
		s.held = append(s.held, b)
		s.bytes += batchBytes(b.n)
		return newColBatch(batchRows), nil
	}
	if s.f == nil {
		f, err := outfile.TempFile("", "fabricsim-trace-*.spool")
		if err != nil {
			return b, fmt.Errorf("trace: spool for Arrow file: %w", err)
		}
		s.f, s.name = f, f.Name()
		// Unlink now where the OS allows it, so a crash leaves nothing
		// behind; until then a stopping signal removes it (outfile).
		if outfile.Remove(s.name) == nil {
			s.name = ""
		}
		s.fw = bufio.NewWriterSize(f, 1<<20)
		for _, h := range s.held {
			if err := s.writeBatch(h); err != nil {
				return b, err
			}
		}
		s.held, s.bytes = nil, 0
	}
	return b, s.writeBatch(b)
}

func (s *spool) write(p []byte) error {
	if _, err := s.fw.Write(p); err != nil {
		return fmt.Errorf("trace: spool for Arrow file: %w", err)
	}
	return nil
}

// writeBatch appends b to the file.
func (s *spool) writeBatch(b *colBatch) error {
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(b.n))
	if err := s.write(hdr[:]); err != nil {
		return err
	}
	for _, c := range b.i64 {
		if err := s.write(arrow.Int64Traits.CastToBytes(c[:b.n])); err != nil {
			return err
		}
	}
	for _, c := range b.i32 {
		if err := s.write(arrow.Int32Traits.CastToBytes(c[:b.n])); err != nil {
			return err
		}
	}
	for _, c := range b.str {
		if err := s.write(arrow.Int32Traits.CastToBytes(c[:b.n])); err != nil {
			return err
		}
	}
	return nil
}

// batches are the batches held in memory (nil for a nil spool).
func (s *spool) batches() []*colBatch {
	if s == nil {
		return nil
	}
	return s.held
}

// reader rewinds the spool's file for reading.
func (s *spool) reader() (io.Reader, error) {
	if err := s.fw.Flush(); err != nil {
		return nil, fmt.Errorf("trace: spool for Arrow file: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("trace: spool for Arrow file: %w", err)
	}
	return bufio.NewReaderSize(s.f, 1<<20), nil
}

// readBatch reads the next spooled batch into b; io.EOF after the last.
func (s *spool) readBatch(r io.Reader, b *colBatch) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("trace: spool for Arrow file: %w", err)
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n > len(b.i64[0]) {
		return fmt.Errorf("trace: spool for Arrow file: corrupt batch of %d rows", n)
	}
	b.n = n
	read := func(p []byte) error {
		if _, err := io.ReadFull(r, p); err != nil {
			return fmt.Errorf("trace: spool for Arrow file: %w", err)
		}
		return nil
	}
	for _, c := range b.i64 {
		if err := read(arrow.Int64Traits.CastToBytes(c[:n])); err != nil {
			return err
		}
	}
	for _, c := range b.i32 {
		if err := read(arrow.Int32Traits.CastToBytes(c[:n])); err != nil {
			return err
		}
	}
	for _, c := range b.str {
		if err := read(arrow.Int32Traits.CastToBytes(c[:n])); err != nil {
			return err
		}
	}
	return nil
}

func (s *spool) close() {
	s.held, s.bytes = nil, 0
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if s.name != "" {
		outfile.Remove(s.name)
		s.name = ""
	}
}
