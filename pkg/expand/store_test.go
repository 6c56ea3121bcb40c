package expand

import (
	"testing"
	"unsafe"
)

// A held flow is two whole cache lines: the padding keeps it from
// straddling three when a field is added or removed.
func TestDynFlowIsTwoCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(dynFlow{}); n != 128 {
		t.Errorf("dynFlow takes %d bytes, want 128 (adjust its padding)", n)
	}
}
