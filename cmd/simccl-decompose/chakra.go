package main

import (
	"fmt"
	"os"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakrarun"
	"github.com/fabricsim/fabricsim/pkg/collective"
)

// runChakra decomposes the --chakra traces into the stream.
func (c *command) runChakra(top *stream.Topology, fwd []rec, model collective.ServerModel, fab collective.Fabric, opt collective.Options) error {
	var groups *chakra.Groups
	if c.CommGroups != "" {
		f, err := os.Open(c.CommGroups)
		if err != nil {
			return err
		}
		groups, err = chakra.ReadGroups(f, c.CommGroups, len(c.traces))
		f.Close()
		if err != nil {
			return err
		}
	}
	layout, err := collective.NewLayout(top.GPUs, 1, top.GPUs, 1, 1)
	if err != nil {
		return err
	}
	d, err := newDecomposer(model, fab, layout, opt)
	if err != nil {
		return err
	}
	run, err := chakrarun.Plan(c.traces, groups, d)
	if err != nil {
		return err
	}
	c.meter.Hide()
	for _, n := range run.Notes {
		fmt.Fprintln(os.Stderr, "simccl-decompose: note:", n)
	}
	if len(c.traces) < top.GPUs {
		fmt.Fprintf(os.Stderr, "simccl-decompose: note: %d ranks have Chakra traces, the topology has %d GPUs: GPUs %d.. stay idle\n", len(c.traces), top.GPUs, len(c.traces))
	}
	if c.Summary {
		err := run.Emit(collective.NewEmitter(discard{}))
		if err != nil {
			return err
		}
		out, done, err := cli.CreateOutput(c.Out, "")
		if err != nil {
			return err
		}
		return done(collective.WriteSummary(out, run.Colls))
	}
	return c.write(top, fwd, func(sw *stream.Writer) error {
		for i := range run.Groups {
			if err := sw.Group(&run.Groups[i]); err != nil {
				return err
			}
		}
		for i := range run.Colls {
			if err := sw.Collective(&run.Colls[i].Rec); err != nil {
				return err
			}
		}
		return run.Emit(collective.NewEmitter(meteredSink(sw, c.meter, run.Colls)))
	})
}
