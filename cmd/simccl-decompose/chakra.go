package main

import (
	"fmt"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/chakrarun"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/roofline"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// runChakra decomposes the --chakra traces into the stream.
func (c *command) runChakra(top *stream.Topology, fwd []rec, model nccl.ServerModel, fab collective.Fabric, opt collective.Options) error {
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
	var roof chakrarun.Roofline
	roofs, err := chakrarun.ApplyRoofline(c.traces, func() (chakrarun.Roofline, error) {
		var err error
		roof, err = c.roofline(top.GPUType)
		return roof, err
	})
	if err != nil {
		return err
	}
	layout, err := workload.NewLayout(top.GPUs, 1, top.GPUs, 1, 1)
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
	// What was left out or assumed goes to stderr and, as note records,
	// into the stream, whose traces carry it to fctstats.
	notes := run.Notes
	if roofs > 0 {
		notes = append(notes, fmt.Sprintf("%d COMP nodes have no duration: they take the roofline's time, max(num_ops / %g TFLOP/s, tensor_size / %g GB/s) (--peak-tflops, --hbm-bw)",
			roofs, roof.PeakFLOPs/1e12, roof.HBMBps/1e9))
	}
	for _, n := range notes {
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
		for _, n := range notes {
			if err := sw.Note(&stream.Note{Producer: "simccl-decompose", Text: n}); err != nil {
				return err
			}
		}
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

// chakraFromStream writes the collective-granularity stream on the input
// as Chakra traces.
func (c *command) chakraFromStream() error {
	r, in, err := cli.OpenStream(c.Input, "pipe a collective-granularity stream in, e.g. topogen --gpus 16 | simccl-decompose --workload W --granularity collective | simccl-decompose --format chakra --out PREFIX")
	if err != nil {
		return err
	}
	defer in.Close()
	s := chakrarun.CollectiveStream{Name: r.Name()}
	jobs := 0
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch kind {
		case stream.KindTopology:
			top, err := r.Topology()
			if err != nil {
				return err
			}
			s.GPUs = top.GPUs
		case stream.KindGroup:
			g, err := r.Group()
			if err != nil {
				return err
			}
			s.Groups = append(s.Groups, *g)
		case stream.KindCollective:
			col, err := r.Collective()
			if err != nil {
				return err
			}
			s.Colls = append(s.Colls, *col)
		case stream.KindFlow:
			var f stream.Flow
			if err := r.Flow(&f); err != nil {
				return err
			}
			s.Flows = append(s.Flows, f)
		case stream.KindJob:
			jobs++
			if jobs > 1 {
				return r.Errorf("", "a second job: Chakra traces hold one job (write each job's stream before --merge)")
			}
		}
	}
	if s.GPUs == 0 {
		return fmt.Errorf("%s: no topology record", r.Name())
	}
	if len(s.Flows) == 0 {
		return fmt.Errorf("%s: no flows: pipe in simccl-decompose's output at --granularity collective (or give --workload or --op)", r.Name())
	}
	files, err := chakrarun.WriteCollectiveStream(&s, c.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "simccl-decompose: wrote %d Chakra traces %s and the group file %s (run them with --chakra %s --comm-groups %s)\n",
		len(files)-1, chakra.RankFile(c.Out, 0)+"...", files[len(files)-1], c.Out, files[len(files)-1])
	return nil
}

// roofline is the GPU's roof for COMP nodes without a duration: the flags,
// else gpuType's datasheet figures.
func (c *command) roofline(gpuType string) (chakrarun.Roofline, error) {
	r, err := roofline.For(gpuType)
	if c.RoofTFlops != nil {
		if !(*c.RoofTFlops > 0 && *c.RoofTFlops < 1e9) {
			return r, fmt.Errorf("--peak-tflops %g: a rate above 0 (and below 1e9)", *c.RoofTFlops)
		}
		r.PeakFLOPs = *c.RoofTFlops * 1e12
	}
	if c.RoofMemBW < 0 {
		return r, fmt.Errorf("--hbm-bw %v: a bandwidth above 0", c.RoofMemBW)
	}
	if c.RoofMemBW > 0 {
		r.HBMBps = float64(c.RoofMemBW) / 8
	}
	if err != nil && (c.RoofTFlops == nil || c.RoofMemBW == 0) {
		return r, fmt.Errorf("no duration, and the topology's GPU type %q has no roofline figures: give --peak-tflops and --hbm-bw", gpuType)
	}
	return r, nil
}
