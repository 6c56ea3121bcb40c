package simaifct

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestNodeIP(t *testing.T) {
	// SimAI's node_id_to_ip: 0x0b000001 + id/256*0x10000 + id%256*0x100.
	for _, id := range []int32{0, 1, 28, 255, 256, 4097, MaxNode} {
		want := uint32(0x0b000001 + (id/256)*0x00010000 + (id%256)*0x00000100)
		if got := NodeIP(id); got != want {
			t.Errorf("NodeIP(%d) = %08x, want %08x", id, got, want)
		}
		if back := IPNode(NodeIP(id)); back != id {
			t.Errorf("IPNode(NodeIP(%d)) = %d", id, back)
		}
	}
	if got := IPNode(0x0b001c01); got != 28 {
		t.Errorf("IPNode(0b001c01) = %d, want 28", got)
	}
}

func TestRead(t *testing.T) {
	in := "0b001c01 0b000101 10000 100 1048576 2000000000 23061 21845\n" +
		"\n# a comment a hand-made file may carry\n" +
		"0B010001\t0a000001  65535 0 0 5 0 0\r\n" +
		"0b000001 0b001c01 1 2 3 4 5 6" // no final newline
	r := NewReader(strings.NewReader(in), "fct.txt")
	got, err := ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{
		{SrcNode: 28, DstNode: 1, Sport: 10000, Dport: 100, SizeBytes: 1048576, StartNs: 2000000000, FctNs: 23061, StandaloneFctNs: 21845},
		{SrcNode: 256, DstNode: 0, Sport: 65535, Dport: 0, SizeBytes: 0, StartNs: 5, FctNs: 0, StandaloneFctNs: 0},
		{SrcNode: 0, DstNode: 28, Sport: 1, Dport: 2, SizeBytes: 3, StartNs: 4, FctNs: 5, StandaloneFctNs: 6},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if r.Line() != 5 {
		t.Errorf("Line() = %d, want 5", r.Line())
	}
}

func TestReadErrors(t *testing.T) {
	good := "0b000001 0b000101 1 2 3 4 5 6\n"
	for _, c := range []struct{ in, want string }{
		{"0b000001 0b000101 1 2 3 4 5\n", "run.txt: line 1, field standalone_fct_ns: missing: the line has 7 fields"},
		{good + "0b000001 0b000101 1 2 3 4 5 6 7\n", `run.txt: line 2, field 9 "7": the line has 9 fields`},
		{"0b00000g 0b000101 1 2 3 4 5 6\n", `line 1, field src_ip: "0b00000g" is not an IPv4 address in hex`},
		{"0b000001 10.0.0.1 1 2 3 4 5 6\n", `line 1, field dst_ip: "10.0.0.1"`},
		{"0b000001 123456789 1 2 3 4 5 6\n", `field dst_ip`},
		{"0b000001 0b000101 65536 2 3 4 5 6\n", `field sport: "65536" is not a port number`},
		{"0b000001 0b000101 1 -2 3 4 5 6\n", `field dport: "-2"`},
		{"0b000001 0b000101 1 2 1.5 4 5 6\n", `field size_bytes: "1.5" is not an unsigned decimal integer`},
		{"0b000001 0b000101 1 2 3 9223372036854775808 5 6\n", `field start_ns: "9223372036854775808"`},
		{"0b000001 0b000101 1 2 3 4 99999999999999999999999 6\n", `field fct_ns`},
		{"0b000001 0b000101 1 2 3 4 5 x\n", `field standalone_fct_ns`},
		{"0b000001 0b000101 1 2 3 9223372036854775000 1000 6\n", `field fct_ns: start_ns + fct_ns overflows`},
		{strings.Repeat("a", 5000), "line 1: longer than 4096 bytes"},
		{strings.Repeat("a", 100000) + "\n", "line 1: longer than 4096 bytes"},
	} {
		_, err := ReadAll(NewReader(strings.NewReader(c.in), "run.txt"))
		if err == nil {
			t.Errorf("%.60q: no error, want %q", c.in, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%.60q: error %q, want it to contain %q on one line", c.in, err, c.want)
		}
	}
	// An I/O error names the file and the line it interrupted.
	_, err := ReadAll(NewReader(io.MultiReader(strings.NewReader(good), iotest.ErrReader(errors.New("disk on fire"))), "run.txt"))
	if err == nil || !strings.Contains(err.Error(), "run.txt: line 2: disk on fire") {
		t.Errorf("I/O error: %v", err)
	}
}

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	lines := []Line{
		{SrcNode: 28, DstNode: 1, Sport: 10000, Dport: 100, SizeBytes: 1048576, StartNs: 2000000000, FctNs: 23061, StandaloneFctNs: 21845},
		{SrcNode: MaxNode, DstNode: 256, SizeBytes: 0, StartNs: 0, FctNs: 0, StandaloneFctNs: 0},
	}
	for i := range lines {
		if err := w.Write(&lines[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// The exact bytes of SimAI's "%08x %08x %u %u %lu %lu %lu %lu\n".
	want := "0b001c01 0b000101 10000 100 1048576 2000000000 23061 21845\n" +
		"0bffff01 0b010001 0 0 0 0 0 0\n"
	if b.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", b.String(), want)
	}
	got, err := ReadAll(NewReader(&b, "x"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		if got[i] != lines[i] {
			t.Errorf("round trip %d: %+v, want %+v", i, got[i], lines[i])
		}
	}
	for _, bad := range []Line{{SrcNode: -1}, {DstNode: MaxNode + 1}, {SizeBytes: -1}, {StandaloneFctNs: -5}} {
		if err := w.Write(&bad); err == nil {
			t.Errorf("Write(%+v): no error", bad)
		}
	}
	if err := w.Write(&Line{DstNode: 70000}); !errors.Is(err, ErrNode) {
		t.Errorf("node 70000: %v, want ErrNode", err)
	}
}

// FuzzReadFCT: any input either reads or fails with one line naming the
// file and line; what reads writes back and re-reads to the same lines.
func FuzzReadFCT(f *testing.F) {
	f.Add([]byte("0b001c01 0b000101 10000 100 1048576 2000000000 23061 21845\n"))
	f.Add([]byte("0b000001 0b000101 1 2 3 4 5\n"))
	f.Add([]byte("# c\n\n0B010001\t0a000001  65535 0 0 5 0 0\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := ReadAll(NewReader(bytes.NewReader(data), "fuzz.txt"))
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.txt: line ") || strings.Contains(msg, "\n") {
				t.Fatalf("error not located on one line: %q", msg)
			}
			return
		}
		var b bytes.Buffer
		w := NewWriter(&b)
		for i := range lines {
			if err := w.Write(&lines[i]); err != nil {
				t.Fatalf("line %d %+v read but does not write: %v", i, lines[i], err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		again, err := ReadAll(NewReader(&b, "again"))
		if err != nil {
			t.Fatalf("written lines do not read: %v", err)
		}
		if len(again) != len(lines) {
			t.Fatalf("%d lines re-read as %d", len(lines), len(again))
		}
		for i := range lines {
			if again[i] != lines[i] {
				t.Fatalf("line %d: %+v re-read as %+v", i, lines[i], again[i])
			}
		}
	})
}

// TestParseAllocs: fct.txt files run to millions of lines; parsing one
// allocates nothing.
func TestParseAllocs(t *testing.T) {
	b := []byte("0b001c01 0b000101 10000 100 1048576 2000000000 23061 21845")
	var l Line
	if n := testing.AllocsPerRun(100, func() {
		if err := parseLine(b, &l); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("parseLine: %v allocations per line, want 0", n)
	}
}

// A partial run's file opens with the PARTIAL line: its reader gives the
// count and skips the line; a whole file, SimAI's, or a mark out of place
// gives 0.
func TestPartialMark(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.WritePartial(37); err != nil {
		t.Fatal(err)
	}
	l := Line{SrcNode: 1, DstNode: 2, Sport: 10000, Dport: 100, SizeBytes: 8, StartNs: 1, FctNs: 2, StandaloneFctNs: 1}
	if err := w.Write(&l); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePartial(1); err == nil {
		t.Error("a mark after a line was written")
	}
	w.Flush()
	if !strings.HasPrefix(b.String(), "# fabricsim: PARTIAL: the run stopped early; 37 transfers never finished and have no line\n0b000101 ") {
		t.Errorf("file:\n%s", b.String())
	}
	r := NewReader(bytes.NewReader(b.Bytes()), "p")
	var got Line
	if n := r.Unfinished(); n != 37 || r.Next(&got) != nil || got != l || r.Next(&got) != io.EOF {
		t.Errorf("read back %d unfinished, %+v", n, got)
	}
	for _, whole := range []string{"0b000101 0b000201 10000 100 8 1 2 1\n", "# a note\n", "", "# fabricsim: PARTIAL: the run stopped early; x transfers"} {
		if n := NewReader(strings.NewReader(whole), "w").Unfinished(); n != 0 {
			t.Errorf("%q: %d unfinished", whole, n)
		}
	}
}
