package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// CreateOutput writes -o FILE through to the file, and stdout is the
// destination without one.
func TestCreateOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.bin")
	w, done, err := CreateOutput(path, "stream")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the file is at its path before it is complete")
	}
	if err := done(nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
		t.Fatalf("file holds %q (%v)", b, err)
	}
	if err := done(nil); err == nil {
		t.Error("closing the file twice reports no error")
	}

	w, done, err = CreateOutput("", "")
	if err != nil || w != os.Stdout || done(nil) != nil {
		t.Fatalf("stdout: %v %v", w, err)
	}
	if _, _, err := CreateOutput(filepath.Join(t.TempDir(), "no", "such", "dir"), ""); err == nil {
		t.Error("no error for a file that cannot be created")
	}
}
