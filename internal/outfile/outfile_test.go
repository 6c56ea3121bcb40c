package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCommitPutsTheFileInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	os.WriteFile(path, []byte("old"), 0o644)
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("before Commit the path holds %q, want the old content", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Commit the path holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want only the output", len(entries))
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	if got := f.Finish(errors.New("boom")); got == nil || got.Error() != "boom" {
		t.Fatalf("Finish returned %v, want the error it was given", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("abort left %d files", len(entries))
	}
}

// A device written in place is never removed, whatever happens: a failed
// write onto /dev/full once deleted the device node.
func TestAbortKeepsADevice(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	got := make(chan string, 1)
	go func() { // a reader, so that opening the FIFO for writing returns
		r, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got <- string(b)
	}()
	f, err := Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	f.Abort()
	if st, err := os.Stat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO is gone after Abort: %v", err)
	}
	// Written in place, not into a temporary file beside it.
	if s := <-got; s != "x" {
		t.Fatalf("the FIFO's reader got %q, want the bytes written", s)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries beside the FIFO after Abort, want only the FIFO", len(entries))
	}
}

func TestCreateNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "out.txt")
	_, err := Create(path)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		t.Fatalf("error %v does not name %s", err, path)
	}
}
