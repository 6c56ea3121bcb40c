package analytical

import (
	"math"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The fault specs: any text yields a fault on a link of the topology or an
// error, never a panic; what parses names a real link, a time that is not
// negative and a positive finite factor.
func FuzzParseLinkFault(f *testing.F) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"0-16@2ms", "16-0", "0-16=0.5", "16-24@0s", "0-99@1us", "a-b", "-1-16=2", "0-16=1e400", "0-16@-1ns", " 0 - 16 @ 3us", "0-16=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseLinkDown(tp, s); err == nil {
			if d.Link < 0 || int(d.Link) >= len(tp.Links) || d.At < 0 {
				t.Errorf("%q: %+v", s, d)
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of several lines: %v", s, err)
		}
		if l, err := ParseLinkScale(tp, s); err == nil {
			if l.Link < 0 || int(l.Link) >= len(tp.Links) || !(l.Factor > 0) || math.IsInf(l.Factor, 0) {
				t.Errorf("%q: %+v", s, l)
			}
		}
	})
}
