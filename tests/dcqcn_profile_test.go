package tests

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// htsim's permutation shape (gen_cm.py permutation): 128 hosts of a k=8
// fat-tree at 400 Gbps each send 4 MB to another, all at 0; ECMP
// collisions share some uplinks. A NIC's DCQCN (DCQCN_PROFILE connectx:
// a byte counter every 32767 bytes) recovers the pairs a collision's
// CNPs cut within microseconds, so the run ends within 5% of the fluid
// model's time on the same paths (331.8 against 323 µs), as CC_MODE 0
// does. SimAI's values (timer rounds only, 900 µs apart) take 1.88x
// (607.3 µs) and the NIC's without the byte counter (RPG_BYTE_RESET 0)
// 1.32x (426.5): the byte counter is what this holds.
func TestDCQCNNICProfilePermutation(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	dst := rng.Perm(128)
	cm := "Nodes 128\nConnections 128\n"
	for i, d := range dst {
		if d == i {
			d = (i + 64) % 128 // no host to itself
		}
		cm += fmt.Sprintf("%d->%d id %d start 0 size 4000000\n", i, d, i+1)
	}
	p := filepath.Join(t.TempDir(), "perm.cm")
	if err := os.WriteFile(p, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128", "--gpus-per-server", "1")
	st := mustRun(t, tp, "simccl-decompose", "--from-htsim", p)
	rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	fluid := endNs(rows)
	rows, _ = readTrace(t, mustRun(t, st, "flowsim-packet", "--set", "DCQCN_PROFILE=connectx"))
	nic := endNs(rows)
	if float64(nic) > 1.05*float64(fluid) {
		t.Errorf("NIC profile: %d ns, %.3fx the fluid model's %d", nic, float64(nic)/float64(fluid), fluid)
	}
}
