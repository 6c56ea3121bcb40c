package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/traffic"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// parseRate reads --rate: "50%" or a share such as 0.5.
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := units.ParseNumber(strings.TrimSuffix(t, "%"))
	if err == nil && pct {
		v /= 100
	}
	if err != nil || !(v > 0 && v <= 1) {
		return 0, cli.Usagef("--rate %q: give a share of the injection bandwidth above 0 and at most 100%% (50%% or 0.5)", s)
	}
	return v, nil
}

// injection is each GPU's bandwidth into the network: its links to
// switches other than NVLink.
func injection(t *stream.Topology) []float64 {
	bw := make([]float64, t.GPUs)
	for _, l := range t.Links {
		if l.Kind == stream.LinkNVLink {
			continue
		}
		for _, end := range []int32{l.A, l.B} {
			if int(end) < t.GPUs {
				bw[end] += l.BWbps
			}
		}
	}
	return bw
}

// messages builds the traffic input's messages.
func (c *command) messages(top *stream.Topology) ([]traffic.Message, error) {
	if c.FromHtsim != "" {
		f, err := os.Open(c.FromHtsim)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		m, err := traffic.ReadHtsim(f, c.FromHtsim, top.GPUs)
		if err != nil {
			return nil, err
		}
		for _, w := range m.Warnings {
			fmt.Fprintln(os.Stderr, "simccl-decompose: warning:", w)
		}
		return m.Messages, nil
	}
	rate, err := parseRate(c.Rate)
	if err != nil {
		return nil, err
	}
	p := traffic.Pattern{Name: c.Pattern, MsgSize: int64(c.MsgSize), Rate: rate, DurationPs: int64(c.Duration), FanIn: c.FanIn, Seed: c.Seed}
	if p.Name != "incast" && c.FanIn != 0 {
		return nil, cli.Usagef("--fan-in is for --pattern incast")
	}
	msgs, err := p.Generate(top.GPUs, injection(top))
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return msgs, nil
}

// writeTraffic writes the stream of a traffic input, or its summary.
func (c *command) writeTraffic(top *stream.Topology, fwd []rec, msgs []traffic.Message) error {
	if c.Summary {
		c.meter.Stop()
		var bytes, last int64
		for _, m := range msgs {
			bytes += m.Size
			last = max(last, m.StartPs)
		}
		fmt.Printf("%d messages, %s, last start at %s, on %d GPUs\n", len(msgs), units.HumanSize(bytes), units.HumanDuration(last), top.GPUs)
		return nil
	}
	return c.write(top, fwd, func(sw *stream.Writer) error {
		return traffic.Emit(collective.NewEmitter(meteredSink(sw, c.meter, nil)), msgs)
	})
}
