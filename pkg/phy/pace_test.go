package phy

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// pacedPair is two 4 KiB steps on one connection (GPU 0 to GPU 8, channel
// 0), the second after the first, the first with pace_ps pace; and a
// third on another channel, which the pace does not concern.
func pacedPair(t *testing.T, pace int64) *flowset.Set {
	t.Helper()
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Topology(tp)
	w.Flow(&stream.Flow{ID: 0, Src: 0, Dst: 8, Size: 4 << 10, ChunkCount: 2, ConnType: stream.ConnNet, PacePs: pace})
	w.Flow(&stream.Flow{ID: 1, Src: 0, Dst: 8, Size: 4 << 10, Chunk: 1, ChunkCount: 2, Deps: []int64{0}, ConnType: stream.ConnNet})
	w.Flow(&stream.Flow{ID: 2, Src: 0, Dst: 8, Size: 4 << 10, Channel: 1, ChunkCount: 1, Deps: []int64{0}, ConnType: stream.ConnNet})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := stream.NewReader(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	set, err := flowset.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// phyrun honours pace_ps as the simulators do (flowset.Pacer): the
// connection's next step does not leave before the paced step's pace has
// passed since it began, however fast its bytes went. Only a lower bound
// is asserted (a loaded machine makes every step later, never earlier).
func TestPaceHoldsTheConnectionsNextStep(t *testing.T) {
	t.Setenv(workerEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const pace = 300 * time.Millisecond
	set := pacedPair(t, pace.Nanoseconds()*1000)
	res, _, err := Run(set, Options{Workers: 2, Exec: exe, Timeout: time.Minute, WorkerArgs: WorkerArgs})
	if err != nil {
		t.Fatal(err)
	}
	if gap := (res[1].End - res[0].Start).Ns(); gap < pace.Nanoseconds() {
		t.Errorf("the connection's next step ended %v after the paced one began, before its pace of %v", time.Duration(gap), pace)
	}
}
