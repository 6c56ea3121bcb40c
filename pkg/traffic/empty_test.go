package traffic

import (
	"strings"
	"testing"
)

// A pattern or matrix that sends nothing is refused naming the flags or
// the header line, not turned into an empty stream (issue 31).
func TestNoMessageRefused(t *testing.T) {
	for _, c := range []struct {
		p    Pattern
		want string
	}{
		{Pattern{Name: "uniform", MsgSize: 1 << 20, Rate: 1, DurationPs: 1}, "--duration 1ps"},
		{Pattern{Name: "permutation", MsgSize: 1 << 20, Rate: 1e-300, DurationPs: 1e9}, "--rate 1e-298%"},
		// 127 senders share 100 Gbps into GPU 0: a 2 MB message each takes
		// 21 ms on average, far beyond a 1 us run.
		{Pattern{Name: "incast", MsgSize: 2 << 20, Rate: 1, DurationPs: 1e6, FanIn: 127, Seed: 3}, "generates no message"},
	} {
		msgs, err := c.p.Generate(128, flat(128, 100e9))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lengthen --duration") {
			t.Errorf("%+v: %d messages, error %v, want %q", c.p, len(msgs), err, c.want)
		}
	}
	// The same incast over a long enough run sends.
	if msgs, err := (Pattern{Name: "incast", MsgSize: 2 << 20, Rate: 1, DurationPs: 1e9, FanIn: 127, Seed: 3}).Generate(128, flat(128, 100e9)); err != nil || len(msgs) == 0 {
		t.Errorf("1 ms incast: %d messages, %v", len(msgs), err)
	}
	if _, err := readCM(t, "Nodes 4\nConnections 0\n", 16); err == nil || !strings.Contains(err.Error(), "m.cm: line 2, field Connections: 0 connections") {
		t.Errorf("empty matrix: %v", err)
	}
}
