package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
)

// virtualStride separates the jobs' cut.first_flow ids (the ids flow
// granularity would give a collective's flows, which a backend's
// --expand gives the flows it makes): job k's are offset by k x 2^40,
// so no two jobs' expanded flows share an id (formats/stream.md).
const virtualStride = 1 << 40

// mergeInput is one job's stream, read once for what the merged
// stream's head needs and once more for its flows.
type mergeInput struct {
	path        string
	job         stream.Job
	topo        []byte
	paths       [][]byte
	groups      []*stream.Group
	colls       []*stream.Collective
	notes       []*stream.Note // what the job's producer left out: kept, as the mix is as incomplete
	flowEnd     int64          // 1 + the highest flow id
	groupEnd    int64
	collEnd     int64
	gpus        map[int32]bool
	first       int32 // the job's lowest GPU: its start node's
	base        int64 // first_flow in the merged stream
	goff, coff  int64
	root        int64 // its start node's id, -1 without one
	flowOffset  int64
	virtualBase int64
}

// mergedNotes are the jobs' notes, each text prefixed "job NAME: " (cut
// to the record's limit), at most stream.MaxNotes: the last then says
// how many more the jobs' own streams hold. A mix of a job that left
// nodes out is as incomplete as that job, and must say so too.
func mergedNotes(ins []*mergeInput) []*stream.Note {
	var out []*stream.Note
	total := 0
	for _, in := range ins {
		total += len(in.notes)
		for _, n := range in.notes {
			text := "job " + in.job.Name + ": " + n.Text
			if len(text) > stream.MaxNoteBytes {
				text = strings.ToValidUTF8(text[:stream.MaxNoteBytes-3], "") + "..."
			}
			out = append(out, &stream.Note{Producer: n.Producer, Text: text})
		}
	}
	if total > stream.MaxNotes {
		out = append(out[:stream.MaxNotes-1], &stream.Note{Producer: "simccl-decompose",
			Text: fmt.Sprintf("--merge: %d more notes of the jobs' streams are not repeated here (read each job's stream)", total-stream.MaxNotes+1)})
	}
	return out
}

// merge writes one stream of several jobs' streams (--merge): the same
// topology, disjoint GPUs, ids made disjoint, each job's start a delay
// node its flows without deps wait for.
func (c *command) merge() error {
	if len(c.Merge) < 2 {
		return cli.Usagef("--merge takes two or more streams, one per job")
	}
	ins := make([]*mergeInput, len(c.Merge))
	names := map[string]string{}
	var gpuOwner map[int32]string
	for k, path := range c.Merge {
		in, err := readMergeHead(path)
		if err != nil {
			return err
		}
		ins[k] = in
		if k > 0 {
			if !bytes.Equal(in.topo, ins[0].topo) {
				return fmt.Errorf("%s: topology: not the topology of %s: the jobs of a merge share one fabric (pipe the same topogen output into each simccl-decompose)", path, ins[0].path)
			}
			if len(in.paths) != len(ins[0].paths) || !equalRaws(in.paths, ins[0].paths) {
				return fmt.Errorf("%s: paths: not the paths records of %s (run the same ncclpath on each job's topology)", path, ins[0].path)
			}
		}
		if other, dup := names[in.job.Name]; dup {
			return fmt.Errorf("%s: job: name %q is also the job of %s (simccl-decompose --job NAME names each)", path, in.job.Name, other)
		}
		names[in.job.Name] = path
		if gpuOwner == nil {
			gpuOwner = map[int32]string{}
		}
		for _, g := range slices.Sorted(maps.Keys(in.gpus)) { // the lowest shared GPU, every run
			if other, ok := gpuOwner[g]; ok {
				return fmt.Errorf("%s: job %q: GPU %d is also job %q's: jobs of a merge run on disjoint GPUs (simccl-decompose --place)", path, in.job.Name, g, other)
			}
			gpuOwner[g] = in.job.Name
		}
	}
	var flows, groups, colls int64
	for k, in := range ins {
		in.base, in.goff, in.coff, in.root = flows, groups, colls, -1
		in.flowOffset = flows
		if in.job.StartPs > 0 {
			in.root = flows
			in.flowOffset++
		}
		in.virtualBase = int64(k) * virtualStride
		flows = in.flowOffset + in.flowEnd
		groups += in.groupEnd
		colls += in.collEnd
	}
	return cli.WriteStream(c.Out, "simccl-decompose", func(sw *stream.Writer) error {
		if err := sw.RawRecord(stream.KindTopology, ins[0].topo); err != nil {
			return err
		}
		for _, p := range ins[0].paths {
			if err := sw.RawRecord(stream.KindPaths, p); err != nil {
				return err
			}
		}
		for _, in := range ins {
			j := stream.Job{Name: in.job.Name, StartPs: in.job.StartPs, FirstGroup: in.goff, FirstCollective: in.coff, FirstFlow: in.base}
			if err := sw.Job(&j); err != nil {
				return err
			}
		}
		for _, n := range mergedNotes(ins) {
			if err := sw.Note(n); err != nil {
				return err
			}
		}
		for _, in := range ins {
			for _, g := range in.groups {
				g.ID += in.goff
				for i := range g.Siblings {
					g.Siblings[i] += in.goff
				}
				if err := sw.Group(g); err != nil {
					return err
				}
			}
		}
		for _, in := range ins {
			for _, co := range in.colls {
				co.ID += in.coff
				if co.Group >= 0 {
					co.Group += in.goff
				}
				if co.Cut != nil && co.Cut.FirstFlow != nil {
					v := *co.Cut.FirstFlow + in.virtualBase
					co.Cut.FirstFlow = &v
				}
				if err := sw.Collective(co); err != nil {
					return err
				}
			}
		}
		for _, in := range ins {
			if err := in.writeFlows(sw); err != nil {
				return err
			}
		}
		return nil
	})
}

func equalRaws(a, b [][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// readMergeHead reads a job's stream to its end: its topology and paths
// records, its job (one at most; without one the job is named after the
// file), groups and collectives, the id ranges and the GPUs it uses.
func readMergeHead(path string) (*mergeInput, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := stream.NewReader(f, path)
	if err != nil {
		return nil, err
	}
	in := &mergeInput{path: path, gpus: map[int32]bool{}}
	jobs := 0
	var gpus int32
	var fl stream.Flow
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch kind {
		case stream.KindFlow:
			if err := r.Flow(&fl); err != nil {
				return nil, err
			}
			if fl.ID < 0 {
				return nil, r.Errorf("id", "flow id %d is negative", fl.ID)
			}
			in.flowEnd = max(in.flowEnd, fl.ID+1)
			for _, n := range []int32{fl.Src, fl.Dst} {
				if n >= 0 && n < gpus {
					in.gpus[n] = true
				}
			}
		case stream.KindNote:
			n, err := r.Note()
			if err != nil {
				return nil, err
			}
			in.notes = append(in.notes, n)
		case stream.KindJob:
			j, err := r.Job()
			if err != nil {
				return nil, err
			}
			if jobs++; jobs > 1 {
				return nil, r.Errorf("", "a second job record: %s is a merged stream; merge the jobs' own streams in one --merge", path)
			}
			if j.FirstGroup != 0 || j.FirstCollective != 0 || j.FirstFlow != 0 {
				return nil, r.Errorf("", "job %q starts at group %d, collective %d, flow %d: a merged stream; merge the jobs' own streams in one --merge", j.Name, j.FirstGroup, j.FirstCollective, j.FirstFlow)
			}
			in.job = *j
		case stream.KindGroup:
			g, err := r.Group()
			if err != nil {
				return nil, err
			}
			in.groups = append(in.groups, g)
			in.groupEnd = max(in.groupEnd, g.ID+1)
			for _, x := range g.Ranks {
				in.gpus[x] = true
			}
		case stream.KindCollective:
			co, err := r.Collective()
			if err != nil {
				return nil, err
			}
			in.colls = append(in.colls, co)
			in.collEnd = max(in.collEnd, co.ID+1)
		default:
			raw, err := r.Raw()
			if err != nil {
				return nil, err
			}
			raw = bytes.Clone(raw)
			switch kind {
			case stream.KindTopology:
				in.topo = raw
				t, err := stream.DecodeRaw(kind, raw, path, r.Index(), (*stream.Reader).Topology)
				if err != nil {
					return nil, err
				}
				gpus = int32(t.GPUs)
			case stream.KindPaths:
				in.paths = append(in.paths, raw)
			}
		}
	}
	if in.topo == nil {
		return nil, fmt.Errorf("%s: no topology record", path)
	}
	if in.flowEnd == 0 {
		return nil, fmt.Errorf("%s: no flows: --merge takes simccl-decompose's streams, one per job", path)
	}
	if in.job.Name == "" {
		in.job.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	in.first = -1
	for g := range in.gpus {
		if in.first < 0 || g < in.first {
			in.first = g
		}
	}
	return in, nil
}

// writeFlows copies the job's flows with their ids moved into its range,
// after its start node: flows that waited for nothing wait for it.
func (in *mergeInput) writeFlows(sw *stream.Writer) error {
	if in.root >= 0 {
		rank := max(in.first, 0)
		if err := sw.Flow(&stream.Flow{ID: in.root, Collective: -1, Src: rank, Dst: rank, Channel: -1, ChunkCount: 1,
			ConnType: stream.ConnDelay, DelayPs: in.job.StartPs}); err != nil {
			return err
		}
	}
	f, err := os.Open(in.path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := stream.NewReader(f, in.path)
	if err != nil {
		return err
	}
	var fl stream.Flow
	for {
		kind, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if kind != stream.KindFlow {
			continue
		}
		if err := r.Flow(&fl); err != nil {
			return err
		}
		fl.ID += in.flowOffset
		if fl.Collective >= 0 {
			fl.Collective += in.coff
		}
		for i := range fl.Deps {
			fl.Deps[i] += in.flowOffset
		}
		if len(fl.Deps) == 0 && in.root >= 0 {
			fl.Deps = append(fl.Deps, in.root)
		}
		if err := sw.Flow(&fl); err != nil {
			return err
		}
	}
}
