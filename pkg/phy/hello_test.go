package phy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// workerEnv makes the test binary a worker of a test's run (the role
// `phyrun --worker` has), started by Run with WorkerArgs' command line.
const workerEnv = "FABRICSIM_PHY_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		var addr string
		id := -1
		for i, a := range os.Args[:len(os.Args)-1] {
			switch a {
			case "--coord":
				addr = os.Args[i+1]
			case "--worker-id":
				id, _ = strconv.Atoi(os.Args[i+1])
			}
		}
		if err := RunWorker(addr, id, os.Getenv(TokenEnv)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// oneFlow is a 1 MiB transfer between two servers' GPUs.
func oneFlow(t *testing.T) *flowset.Set {
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
	w.Flow(&stream.Flow{ID: 0, Src: 0, Dst: 8, Size: 1 << 20, ConnType: stream.ConnP2P})
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

// Local processes that connect to the coordinator before the workers do
// delay nobody: four that stay silent (the serial handshake once waited
// 10 s on each, and the run failed after 30 s with "1 of 2 said hello"),
// one claiming worker 0 without the token, one sending garbage and one an
// endless hello. The strangers that spoke are refused at once, the silent
// ones dropped when the workers have joined, and the run succeeds well
// before any stranger's handshake times out.
func TestStrangersDoNotDelayTheWorkers(t *testing.T) {
	t.Setenv(workerEnv, "1")
	set := oneFlow(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var idle, refused []net.Conn // set by WorkerArgs, in Run's goroutine, before dialed is closed
	dialed := make(chan struct{})
	t.Cleanup(func() {
		for _, c := range append(idle, refused...) {
			c.Close()
		}
	})
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return nil
		}
		return c
	}
	args := func(addr string, id int) []string {
		if id == 0 { // before any worker starts
			for range 4 {
				if c := dial(addr); c != nil {
					idle = append(idle, c)
				}
			}
			impostor, _ := msgpack.Marshal(&ctl{T: "hello", ID: 0, Addr: "127.0.0.1:1", Token: "00112233445566778899aabbccddeeff"})
			endless := append([]byte{0xdb, 0x7f, 0xff, 0xff, 0xff}, make([]byte, 1<<20)...) // a 2 GiB string, of which 1 MiB is sent
			for _, b := range [][]byte{impostor, []byte("GET / HTTP/1.0\r\n\r\n"), endless} {
				if c := dial(addr); c != nil {
					refused = append(refused, c)
					go c.Write(b)
				}
			}
			close(dialed)
		}
		return WorkerArgs(addr, id)
	}
	start := time.Now()
	type result struct {
		res []flowset.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, _, err := Run(set, Options{Workers: 2, StepSize: 64 << 10, Exec: exe, Timeout: time.Minute, WorkerArgs: args})
		done <- result{res, err}
	}()
	select {
	case <-dialed:
	case r := <-done:
		t.Fatalf("the run ended before starting its workers: %v", r.err)
	}
	for i, c := range refused {
		c.SetReadDeadline(time.Now().Add(helloTimeout / 2))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("stranger %d: read %v, want its connection closed at once", i, err)
		}
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("the run failed: %v", r.err)
		}
		if r.res[0].End <= r.res[0].Start {
			t.Fatalf("the flow's timing %+v", r.res[0])
		}
	case <-time.After(helloTimeout):
		t.Fatalf("the run took over %s: the strangers held up the workers", helloTimeout)
	}
	if took := time.Since(start); took >= helloTimeout {
		t.Fatalf("the run took %s, the strangers' whole handshake timeout", took)
	}
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("silent stranger %d: read %v after the run, want its connection closed", i, err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Workers that never come are reported, naming how many did.
func TestGatherTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _, err = gather(ln, 2, "secret", 100*time.Millisecond)
	if err == nil || err.Error() != "waiting for the workers: 0 of 2 said hello within 100ms" {
		t.Fatalf("error %v", err)
	}
}
