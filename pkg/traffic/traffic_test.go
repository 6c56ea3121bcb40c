package traffic

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func flat(n int, bps float64) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = bps
	}
	return b
}

// Each sender offers Rate of its bandwidth: over D the bytes it sends are
// Rate x B x D / 8, within the Poisson count's noise (5 sigma).
func TestPatternOfferedLoad(t *testing.T) {
	const gpus, bps, size = 16, 400e9, 4096
	for _, name := range Patterns {
		p := Pattern{Name: name, MsgSize: size, Rate: 0.25, DurationPs: 200e6, FanIn: 4, Seed: 3}
		msgs, err := p.Generate(gpus, flat(gpus, bps))
		if err != nil {
			t.Fatal(err)
		}
		senders := gpus
		if name == "incast" {
			senders = 1 // together they offer 25% of GPU 0's bandwidth
		}
		want := float64(senders) * p.Rate * bps * 200e-6 / 8 / size // messages
		if got := float64(len(msgs)); math.Abs(got-want) > 5*math.Sqrt(want) {
			t.Errorf("%s: %d messages, expected %.0f", name, len(msgs), want)
		}
		last := int64(-1)
		for _, m := range msgs {
			if m.StartPs < last || m.StartPs >= p.DurationPs || m.Src == m.Dst || m.Size != size {
				t.Fatalf("%s: message %+v out of order, range or shape", name, m)
			}
			last = m.StartPs
		}
	}
}

// Destinations by hand.
func TestPatternDestinations(t *testing.T) {
	gen := func(name string, fanIn int) []Message {
		msgs, err := Pattern{Name: name, MsgSize: 1 << 20, Rate: 1, DurationPs: 2e9, FanIn: fanIn, Seed: 9}.Generate(16, flat(16, 400e9))
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	// permutation: one partner each, a bijection without fixed points.
	partner := map[int32]int32{}
	for _, m := range gen("permutation", 0) {
		if p, ok := partner[m.Src]; ok && p != m.Dst {
			t.Fatalf("permutation: GPU %d sends to %d and %d", m.Src, p, m.Dst)
		}
		partner[m.Src] = m.Dst
	}
	seen := map[int32]bool{}
	for _, d := range partner {
		seen[d] = true
	}
	if len(partner) != 16 || len(seen) != 16 {
		t.Fatalf("permutation: %d senders, %d receivers", len(partner), len(seen))
	}
	// shift-alltoall: each GPU's k-th message goes to src+1+k mod 15.
	k := map[int32]int{}
	for _, m := range gen("shift-alltoall", 0) {
		if want := int32((int(m.Src) + 1 + k[m.Src]%15) % 16); m.Dst != want {
			t.Fatalf("shift-alltoall: message %d of GPU %d to %d, want %d", k[m.Src], m.Src, m.Dst, want)
		}
		k[m.Src]++
	}
	// stencil on a 4x4 torus: GPU 5 (row 1, col 1) talks to 1, 9, 4, 6.
	// nearest-neighbour: GPU 5 to 4 and 6.
	for name, want := range map[string][]int32{"stencil": {1, 4, 6, 9}, "nearest-neighbour": {4, 6}} {
		got := map[int32]bool{}
		for _, m := range gen(name, 0) {
			if m.Src == 5 {
				got[m.Dst] = true
			}
		}
		var ds []int32
		for _, d := range want {
			if got[d] {
				ds = append(ds, d)
			}
		}
		if len(got) != len(want) || !reflect.DeepEqual(ds, want) {
			t.Errorf("%s: GPU 5 sends to %v, want %v", name, got, want)
		}
	}
	// incast: exactly fan-in distinct senders, all into GPU 0.
	src := map[int32]bool{}
	for _, m := range gen("incast", 5) {
		if m.Dst != 0 || m.Src == 0 {
			t.Fatalf("incast message %+v", m)
		}
		src[m.Src] = true
	}
	if len(src) != 5 {
		t.Fatalf("incast: %d senders, want 5", len(src))
	}
	// A seed fixes the run; another seed changes it.
	a, b := gen("uniform", 0), gen("uniform", 0)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("uniform: two runs of one seed differ")
	}
	c, _ := Pattern{Name: "uniform", MsgSize: 1 << 20, Rate: 1, DurationPs: 2e9, Seed: 10}.Generate(16, flat(16, 400e9))
	if reflect.DeepEqual(a, c) {
		t.Fatal("uniform: seeds 9 and 10 give the same run")
	}
}

func TestPatternRefuses(t *testing.T) {
	for _, c := range []struct {
		p    Pattern
		want string
	}{
		{Pattern{Name: "uniform", MsgSize: 1024, Rate: 1.5, DurationPs: 1e6}, "at most 100%"},
		{Pattern{Name: "uniform", MsgSize: 1024, Rate: 0, DurationPs: 1e6}, "above 0%"},
		{Pattern{Name: "uniform", MsgSize: 1024, Rate: 1, DurationPs: 0}, "--duration"},
		{Pattern{Name: "uniform", MsgSize: 0, Rate: 1, DurationPs: 1e6}, "--msg-size"},
		{Pattern{Name: "incast", MsgSize: 1024, Rate: 1, DurationPs: 1e6, FanIn: 16}, "--fan-in 16"},
		{Pattern{Name: "hotspot", MsgSize: 1024, Rate: 1, DurationPs: 1e6}, "one of"},
		{Pattern{Name: "uniform", MsgSize: 1, Rate: 1, DurationPs: 1e12}, "more than"},
	} {
		if _, err := c.p.Generate(16, flat(16, 400e9)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.p, err, c.want)
		}
	}
}

func readCM(t *testing.T, text string, gpus int) (*Matrix, error) {
	t.Helper()
	return ReadHtsim(strings.NewReader(text), "m.cm", gpus)
}

// The generator's shapes: permutation and incast start at 0; the serial
// all-to-all chains each host's flows through oneshot triggers.
func TestReadHtsimShapes(t *testing.T) {
	open := func(name string) *Matrix {
		f, err := os.Open(filepath.Join("..", "..", "examples", "htsim", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := ReadHtsim(f, name, 16)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := open("permutation16.cm"); len(m.Messages) != 16 {
		t.Fatalf("permutation: %d messages", len(m.Messages))
	}
	if m := open("incast16.cm"); len(m.Messages) != 15 || m.Messages[3].Dst != 0 || m.Messages[3].Size != 1<<20 {
		t.Fatalf("incast: %+v", m.Messages)
	}
	m := open("alltoall_serial8.cm")
	if len(m.Messages) != 56 {
		t.Fatalf("serial all-to-all: %d messages", len(m.Messages))
	}
	// Host h's flows reach h+1, h+2, ... in order, each after the last.
	last := map[int32]int32{}
	for i, msg := range m.Messages {
		prev, ok := last[msg.Src]
		switch {
		case !ok && len(msg.After) != 0:
			t.Fatalf("first flow of host %d waits for %v", msg.Src, msg.After)
		case ok && !reflect.DeepEqual(msg.After, []int32{prev}):
			t.Fatalf("flow %d of host %d waits for %v, want [%d]", i, msg.Src, msg.After, prev)
		case ok && msg.Dst != (m.Messages[prev].Dst+1)%8:
			t.Fatalf("host %d sends to %d after %d", msg.Src, msg.Dst, m.Messages[prev].Dst)
		}
		last[msg.Src] = int32(i)
	}
}

// Barriers wait for all their activators; start times are picoseconds.
func TestReadHtsimBarrier(t *testing.T) {
	m, err := readCM(t, `# a barrier
Nodes 4
Connections 3
Triggers 1
0->1 id 1 start 2000000 size 10 recv_done_trigger 5
2->1 id 2 start 0 size 10 send_done_trigger 5
1->3 id 3 trigger 5 size 10
trigger id 5 barrier count 2
`, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Messages; len(got) != 3 || got[0].StartPs != 2e6 || !reflect.DeepEqual(got[2].After, []int32{0, 1}) {
		t.Fatalf("messages %+v", got)
	}
}

func TestReadHtsimRefuses(t *testing.T) {
	const head = "Nodes 4\nConnections 1\n"
	for _, c := range []struct{ text, want string }{
		{head + "0->1 id 1 start 0 size 10 colour 3\n", "line 3, field colour: unknown connection attribute"},
		{head + "0->1 id 1 trigger 4 size 10\n", "line 3, field trigger: trigger 4 is used but never declared"},
		{head + "0->9 id 1 start 0 size 10\n", `line 3, field dst: "9" is not a host 0-3`},
		{head + "0->1 id 1 size 10\n", "neither a start time nor a trigger"},
		{head + "0->1 id 1 start 0 size 0\n", "field size"},
		{"Nodes 64\nConnections 0\n", "line 1, field Nodes: 64 hosts, the topology has 16 GPUs"},
		{"Nodes 4\nConnections 2\n0->1 id 1 start 0 size 1\n", "field Connections: 2 announced, 1 in the file"},
		{"Nodes 4\nConnections 2\nTriggers 2\n0->1 id 1 trigger 1 size 1 send_done_trigger 2\n1->2 id 2 trigger 2 size 1 send_done_trigger 1\ntrigger id 1 oneshot\ntrigger id 2 oneshot\n", "waits, through its triggers, for itself"},
		{"Nodes 4\nConnections 3\nTriggers 1\n0->1 id 1 start 0 size 1 send_done_trigger 1\n2->1 id 2 start 0 size 1 send_done_trigger 1\n1->3 id 3 trigger 1 size 1\ntrigger id 1 oneshot\n", "make it a barrier with count 2"},
		{"Nodes 4\nConnections 2\nTriggers 1\n0->1 id 1 start 0 size 1 send_done_trigger 1\n1->3 id 3 trigger 1 size 1\ntrigger id 1 barrier count 3\n", "barrier 1 waits for 3 activations, 1 flows activate it"},
		{"Nodes 4\nConnections 0\nFailures 1\n", "not supported"},
	} {
		if _, err := readCM(t, c.text, 16); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

func FuzzReadHtsim(f *testing.F) {
	for _, name := range []string{"permutation16.cm", "incast16.cm", "alltoall_serial8.cm"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "htsim", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ReadHtsim(strings.NewReader(text), "f.cm", 16)
		if err != nil {
			return
		}
		for i, msg := range m.Messages {
			if msg.Src == msg.Dst || msg.Src < 0 || msg.Dst >= 16 || msg.Size <= 0 {
				t.Fatalf("message %d: %+v", i, msg)
			}
			for _, a := range msg.After {
				if int(a) >= i {
					t.Fatalf("message %d waits for %d", i, a)
				}
			}
		}
	})
}
