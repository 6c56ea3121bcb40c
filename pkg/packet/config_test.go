package packet

import (
	"os"
	"strings"
	"testing"
)

// The shipped configurations load; switches fabricsim does not model are
// refused when turned on, naming the file, line and key.
func TestConfigKeys(t *testing.T) {
	for _, name := range []string{"../../examples/conf/default.conf", "../../examples/conf/SimAI.conf"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig()
		err = c.Read(f, name)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, key := range []string{"GLOBAL_T", "L2_BACK_TO_ZERO"} {
		c := DefaultConfig()
		if err := c.Read(strings.NewReader("CC_MODE 1\n"+key+" 0\n"), "ok.conf"); err != nil {
			t.Errorf("%s 0: %v", key, err)
		}
		err := c.Read(strings.NewReader("CC_MODE 1\n"+key+" 1\n"), "x.conf")
		if err == nil || !strings.Contains(err.Error(), "x.conf: line 2, key "+key) || !strings.Contains(err.Error(), "not implemented") {
			t.Errorf("%s 1: %v", key, err)
		}
	}
	c := DefaultConfig()
	if err := c.SetKV("L2_CHUNK_SIZE=4000"); err != nil {
		t.Errorf("L2_CHUNK_SIZE is accepted and ignored: %v", err)
	}
}
