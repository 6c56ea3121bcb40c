package stats

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/formats/simaifct"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// Kind is what an input holds.
type Kind string

// Input kinds: a fabricsim flow trace (any of its three containers) or
// SimAI's fct.txt.
const (
	KindTrace    Kind = "trace"
	KindSimAIFCT Kind = "simai-fct"
)

// Input is one opened trace or fct.txt, read row by row. SimAI lines come
// out as trace rows: flow_id is the line's ordinal among flows (0-based),
// collective_id -1, conn_type empty (fct.txt has neither),
// end = start + fct, ideal_fct = standalone_fct.
type Input struct {
	Name      string
	Kind      Kind
	Container string      // arrow-stream, arrow-file, parquet or simai-fct
	Meta      *trace.Meta // nil for fct.txt
	tr        *trace.Reader
	fr        *simaifct.Reader
	line      simaifct.Line
	n         int64
	closer    io.Closer
	ids       idSet

	// OnRows, when set, is told the rows read so far every 16384 rows
	// (a progress meter: nothing per row).
	OnRows func(read int64)
}

// Open opens a trace file or a SimAI fct.txt, telling them apart by their
// first bytes (never by the name, as trace.Open does): Parquet and Arrow
// files by their magic, an Arrow stream by its binary framing, fct.txt by
// being text.
func Open(path string) (*Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, trace.PathError(path, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s: is a directory", path)
	} else if err == nil && !st.Mode().IsRegular() {
		// A FIFO (<(...) in a shell) cannot be peeked and reopened.
		in, err := NewInput(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		in.closer = multiCloser{in.closer, f}
		return in, nil
	}
	var head [8]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if n == 0 {
		f.Close()
		return nil, fmt.Errorf("%s: empty file: no trace rows and no fct.txt lines", path)
	}
	if isText(head[:n]) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		return &Input{Name: path, Kind: KindSimAIFCT, Container: string(KindSimAIFCT), fr: simaifct.NewReader(f, path), closer: f}, nil
	}
	f.Close()
	tr, err := trace.Open(path)
	if err != nil {
		return nil, err
	}
	return traceInput(path, tr), nil
}

// NewInput reads a trace or fct.txt from r (typically stdin), called name
// in errors. Close does not close r.
func NewInput(r io.Reader, name string) (*Input, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(8)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(head) == 0 {
		return nil, fmt.Errorf("%s: empty input: no trace rows and no fct.txt lines (did the simulator fail?)", name)
	}
	if isText(head) {
		return &Input{Name: name, Kind: KindSimAIFCT, Container: string(KindSimAIFCT), fr: simaifct.NewReader(br, name)}, nil
	}
	tr, err := trace.NewReader(br, name)
	if err != nil {
		return nil, err
	}
	return traceInput(name, tr), nil
}

func traceInput(name string, tr *trace.Reader) *Input {
	m := tr.Meta()
	return &Input{Name: name, Kind: KindTrace, Container: tr.Container().String(), Meta: &m, tr: tr, closer: tr}
}

// isText reports whether the first bytes look like fct.txt: the trace
// containers start with "PAR1", "ARROW1" or a binary Arrow message (0xFF
// continuation marker), and anything else is read as fct.txt, whose
// errors then say which line and field did not parse.
func isText(head []byte) bool {
	if trace.Detect(head) != trace.ArrowStream {
		return false
	}
	for _, c := range head {
		if c >= 0x7f || (c < ' ' && c != '\t' && c != '\n' && c != '\r') {
			return false
		}
	}
	return true
}

// Partial reports how many flows of the run never finished when the
// trace says the run stopped early (formats/trace.md), else 0.
func (in *Input) Partial() int64 {
	if in.fr != nil {
		return in.fr.Unfinished() // flowsim-packet's mark in fct.txt
	}
	if in.Meta == nil {
		return 0
	}
	return in.Meta.Unfinished
}

// CheckWhole refuses a partial trace: a report of the flows that finished
// would read as the run's.
func (in *Input) CheckWhole() error {
	if n := in.Partial(); n > 0 {
		mark := "fabricsim.complete=false"
		if in.Kind == KindSimAIFCT {
			mark = "its first line says PARTIAL"
		}
		return fmt.Errorf("%s: partial trace: the run stopped early and %d flows never finished (%s); --allow-partial reports what finished, marked PARTIAL", in.Name, n, mark)
	}
	return nil
}

// Columns names the columns or fields the input provides.
func (in *Input) Columns() []string {
	if in.Kind == KindSimAIFCT {
		return simaifct.Fields[:]
	}
	return in.tr.Columns()
}

// Next reads the next row; io.EOF after the last.
func (in *Input) Next(r *trace.Row) error {
	if in.tr != nil {
		return in.tr.Next(r)
	}
	if err := in.fr.Next(&in.line); err != nil {
		return err
	}
	l := &in.line
	*r = trace.Row{FlowID: in.n, CollectiveID: -1, Src: l.SrcNode, Dst: l.DstNode,
		SizeBytes: l.SizeBytes, StartNs: l.StartNs, EndNs: l.StartNs + l.FctNs,
		FctNs: l.FctNs, IdealFctNs: l.StandaloneFctNs, Channel: -1,
		Layer: -1, Microbatch: -1, Stage: -1, Status: trace.StatusOK}
	in.n++
	return nil
}

// Each calls fn with every row in turn, after checkRow; the row is
// reused between calls. It stops at the first error, fn's included.
func (in *Input) Each(fn func(r *trace.Row) error) error {
	var row trace.Row
	for i := int64(0); ; i++ {
		err := in.Next(&row)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkRow(in, i, &row); err != nil {
			return err
		}
		if !in.ids.add(row.FlowID) {
			return fmt.Errorf("%s: row %d, field flow_id: %d is a duplicate (an earlier row has it; flow ids are unique within a run)", in.Name, i, row.FlowID)
		}
		if err := fn(&row); err != nil {
			return err
		}
		if in.OnRows != nil && (i+1)&(1<<14-1) == 0 {
			in.OnRows(i + 1)
		}
	}
}

// Close closes the file Open opened.
func (in *Input) Close() error {
	if in.closer == nil {
		return nil
	}
	err := in.closer.Close()
	in.closer = nil
	return err
}

type multiCloser [2]io.Closer

func (m multiCloser) Close() error {
	var err error
	for _, c := range m {
		if c == nil {
			continue
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
