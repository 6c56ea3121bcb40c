package packet

import (
	"os"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
)

// FuzzReadConfig feeds Config.Read arbitrary SimAI.conf text: it never
// panics, and an error names the file and line it stopped at.
func FuzzReadConfig(f *testing.F) {
	for _, name := range []string{"../../examples/conf/default.conf", "../../examples/conf/SimAI.conf"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{"CC_MODE 3\n", "KMAX_MAP 2 25000000000 400 100000000000 1600\n", "LINK_DOWN 1000 0 8\n", "BUFFER_SIZE 16 # MB\n", "RATE_AI 5Gb/s\n", "MON_START 0.5\n", "ECMP_KEY connection\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c := DefaultConfig()
		if err := c.Read(strings.NewReader(text), "fuzz.conf"); err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.conf: line ") {
				t.Fatalf("error does not name file and line: %v", err)
			}
			return
		}
		_, _ = cc.New(c.CCMode, c.CC)
	})
}
