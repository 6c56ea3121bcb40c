package stream

import (
	"errors"
	"testing"
)

// FuzzReader: arbitrary bytes either read cleanly or fail with a located
// *Error; never a panic.
func FuzzReader(f *testing.F) {
	f.Add(writeSample(f))
	f.Add([]byte{})
	f.Add([]byte{0x92, 0xa6, 'h', 'e', 'a', 'd', 'e', 'r', 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := readAll(data); err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("unlocated error %T: %v", err, err)
			}
		}
	})
}
