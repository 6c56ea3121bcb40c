// Package simaifct reads and writes SimAI's flow completion file, fct.txt,
// so that fabricsim runs and SimAI runs can be compared flow by flow.
//
// SimAI's ns-3 backend (qp_finish) appends one line per finished flow:
//
//	src_ip dst_ip sport dport size_bytes start_ns fct_ns standalone_fct_ns
//	0b000001 0b000801 10000 100 1048576 2000000000 23061 21845
//
// written with "%08x %08x %u %u %lu %lu %lu %lu\n". The IPs are hexadecimal
// with the node id in bits 8–23 (SimAI's node_id_to_ip is
// 0x0b000001 + id/256·0x10000 + id%256·0x100, so 0b001c01 is node 28);
// standalone_fct_ns is the flow alone on an idle fabric: in SimAI base RTT
// (a full-MTU packet at every hop) plus size over the bottleneck
// bandwidth; flowsim-packet writes its trace's ideal_fct_ns there, a lower
// bound that serializes a transfer's smallest packet rather than a full
// MTU at the hops other than the bottleneck (formats/trace.md), so small
// transfers read shorter than in SimAI's file. Fields are separated by
// spaces or tabs.
//
// The reader also accepts IPs of other prefixes (only bits 8–23 are
// used), blank lines and lines starting with '#' (SimAI writes neither;
// hand-made files do). Everything else that does not parse is an error
// naming the file, the line and the field.
package simaifct

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Line is one finished flow. Node ids are SimAI's (GPU id == global rank).
type Line struct {
	SrcNode, DstNode int32
	Sport, Dport     uint16
	SizeBytes        int64
	StartNs          int64
	FctNs            int64
	StandaloneFctNs  int64
}

// Fields names the eight fields in file order, as errors name them.
var Fields = [8]string{"src_ip", "dst_ip", "sport", "dport", "size_bytes", "start_ns", "fct_ns", "standalone_fct_ns"}

const fieldList = "src_ip dst_ip sport dport size_bytes start_ns fct_ns standalone_fct_ns"

// MaxNode is the largest node id an IP can carry (16 bits).
const MaxNode = 0xffff

// NodeIP is SimAI's node_id_to_ip: 11.x.y.1 with the node id in bits 8–23.
func NodeIP(node int32) uint32 { return 0x0b000001 | uint32(node)<<8 }

// IPNode is SimAI's ip_to_node_id: bits 8–23 of the address.
func IPNode(ip uint32) int32 { return int32(ip >> 8 & 0xffff) }

// maxLine bounds a line: a SimAI line is under 100 bytes, so anything far
// longer is not this format, and the bound keeps garbage from growing the
// buffer without limit.
const maxLine = 4096

// Reader reads fct.txt lines.
type Reader struct {
	br   *bufio.Reader
	name string
	line int
	err  error // sticky
}

// NewReader reads fct.txt from r, called name in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), name: name}
}

// Line returns the number of the line Next read last (1-based).
func (r *Reader) Line() int { return r.line }

// Next reads the next flow into l. It returns io.EOF after the last one;
// other errors are one line: "<name>: line N, field F: reason".
func (r *Reader) Next(l *Line) error {
	for r.err == nil {
		b, err := r.readLine()
		if err != nil {
			r.err = err
			break
		}
		b = trimSpace(b)
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if err := parseLine(b, l); err != nil {
			r.err = fmt.Errorf("%s: line %d, %w", r.name, r.line, err)
			break
		}
		return nil
	}
	return r.err
}

// readLine returns the next line without its newline; the slice is valid
// until the next call.
func (r *Reader) readLine() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || (err == nil && len(b) > maxLine) || (err == io.EOF && len(b) > maxLine) {
		return nil, fmt.Errorf("%s: line %d: longer than %d bytes: not a SimAI fct.txt line", r.name, r.line+1, maxLine)
	}
	if err == io.EOF {
		if len(b) == 0 {
			return nil, io.EOF
		}
		err = nil // a last line without a newline
	}
	if err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", r.name, r.line+1, err)
	}
	r.line++
	return b, nil
}

// ReadAll reads the remaining lines of r.
func ReadAll(r *Reader) ([]Line, error) {
	var out []Line
	for {
		var l Line
		err := r.Next(&l)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
}

// fieldError is the part of an error after "<name>: line N, ".
func fieldError(i int, format string, args ...any) error {
	return fmt.Errorf("field %s: "+format, append([]any{Fields[i]}, args...)...)
}

func parseLine(b []byte, l *Line) error {
	var f [len(Fields)][]byte
	var extra []byte // the first field past the eighth
	n := 0
	for len(b) > 0 {
		i := 0
		for i < len(b) && !isSpace(b[i]) {
			i++
		}
		if n < len(f) {
			f[n] = b[:i]
		} else if n == len(f) {
			extra = b[:i]
		}
		n++
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		b = b[i:]
	}
	if n < len(f) {
		return fieldError(n, "missing: the line has %d fields, SimAI's fct.txt has 8 (%s)", n, fieldList)
	}
	if n > len(f) {
		return fmt.Errorf("field 9 %q: the line has %d fields, SimAI's fct.txt has 8 (%s)", clip(extra), n, fieldList)
	}
	// strconv does not allocate for string(f[i]) here: the string does not
	// escape (a NumError holds a copy), so short fields stay on the stack.
	for i := 0; i < 2; i++ {
		// 1 to 8 hex digits; SimAI writes exactly 8.
		ip, err := strconv.ParseUint(string(f[i]), 16, 32)
		if err != nil || len(f[i]) > 8 {
			return fieldError(i, "%q is not an IPv4 address in hex (like 0b001c01)", clip(f[i]))
		}
		if i == 0 {
			l.SrcNode = IPNode(uint32(ip))
		} else {
			l.DstNode = IPNode(uint32(ip))
		}
	}
	for i := 2; i < 4; i++ {
		v, err := strconv.ParseUint(string(f[i]), 10, 16)
		if err != nil {
			return fieldError(i, "%q is not a port number (0..65535)", clip(f[i]))
		}
		if i == 2 {
			l.Sport = uint16(v)
		} else {
			l.Dport = uint16(v)
		}
	}
	dst := [4]*int64{&l.SizeBytes, &l.StartNs, &l.FctNs, &l.StandaloneFctNs}
	for i := 4; i < 8; i++ {
		v, err := strconv.ParseUint(string(f[i]), 10, 63)
		if err != nil {
			return fieldError(i, "%q is not an unsigned decimal integer below 2^63", clip(f[i]))
		}
		*dst[i-4] = int64(v)
	}
	if l.StartNs > math.MaxInt64-l.FctNs {
		return fieldError(6, "start_ns + fct_ns overflows a 64-bit time")
	}
	return nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// clip shortens a found value for an error message.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// Writer writes fct.txt lines exactly as SimAI's qp_finish formats them.
type Writer struct {
	bw   *bufio.Writer
	buf  []byte
	line int
}

// NewWriter writes fct.txt to w. Call Flush when done.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 128)}
}

// ErrNode is returned (wrapped) for a node id that an IP cannot carry.
var ErrNode = errors.New("node id does not fit SimAI's 16-bit node field (0..65535)")

// Write appends one line. Node ids must be 0..65535 and sizes and times
// non-negative, since SimAI's fields are unsigned.
func (w *Writer) Write(l *Line) error {
	w.line++
	if l.SrcNode < 0 || l.SrcNode > MaxNode {
		return fmt.Errorf("simaifct: line %d, src node %d: %w", w.line, l.SrcNode, ErrNode)
	}
	if l.DstNode < 0 || l.DstNode > MaxNode {
		return fmt.Errorf("simaifct: line %d, dst node %d: %w", w.line, l.DstNode, ErrNode)
	}
	for i, v := range [4]int64{l.SizeBytes, l.StartNs, l.FctNs, l.StandaloneFctNs} {
		if v < 0 {
			return fmt.Errorf("simaifct: line %d, field %s: %d is negative", w.line, Fields[4+i], v)
		}
	}
	b := w.buf[:0]
	b = appendHex8(b, NodeIP(l.SrcNode))
	b = append(b, ' ')
	b = appendHex8(b, NodeIP(l.DstNode))
	for _, v := range [6]uint64{uint64(l.Sport), uint64(l.Dport), uint64(l.SizeBytes), uint64(l.StartNs), uint64(l.FctNs), uint64(l.StandaloneFctNs)} {
		b = append(b, ' ')
		b = strconv.AppendUint(b, v, 10)
	}
	b = append(b, '\n')
	w.buf = b
	_, err := w.bw.Write(b)
	return err
}

// partialLine opens the file of a run that stopped early (fabricsim's
// mark: SimAI writes no '#' line, and readers that skip them, ours
// included, read the rest as ever).
const partialLine = "# fabricsim: PARTIAL: the run stopped early; %d transfers never finished and have no line\n"

// WritePartial marks the file as a partial run's, with the count of
// transfers that have no line; it must come before the first line.
func (w *Writer) WritePartial(unfinished int64) error {
	if w.line > 0 || unfinished <= 0 {
		return fmt.Errorf("simaifct: the partial mark (%d unfinished) goes first, with a positive count", unfinished)
	}
	_, err := fmt.Fprintf(w.bw, partialLine, unfinished)
	return err
}

// Unfinished is the count of transfers WritePartial said never finished,
// read from the file's first line (0: a whole run's file, or SimAI's).
// Call it before Next.
func (r *Reader) Unfinished() int64 {
	head, _ := r.br.Peek(len(partialLine) + 24)
	line, _, _ := bytes.Cut(head, []byte("\n"))
	var n int64
	if _, err := fmt.Sscanf(string(line)+"\n", partialLine, &n); err != nil || n <= 0 {
		return 0
	}
	return n
}

// Flush writes buffered lines to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// appendHex8 is %08x.
func appendHex8(b []byte, v uint32) []byte {
	const digits = "0123456789abcdef"
	for s := 28; s >= 0; s -= 4 {
		b = append(b, digits[v>>uint(s)&0xf])
	}
	return b
}
