package collective

import (
	"fmt"
	"io"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/xmltree"
	"github.com/fabricsim/fabricsim/pkg/nccl"
)

// MSCCLAlgo is an MSCCL algorithm (msccl-tools XML): per GPU, threadblocks
// each bound to one send peer, one receive peer and a channel, running
// steps in order; a step may also wait for a step of another threadblock.
type MSCCLAlgo struct {
	Name       string
	Coll       Op
	NGPUs      int
	Channels   int
	ChunksLoop int
	Proto      Proto
	GPUs       []mscclGPU
	file       string

	// ChunkBytes caps a chunk (MSCCL's chunk size, the ns-3 MSCCL
	// ThreadBlock's chunkSize): a collective larger than ChunkBytes x
	// nchunksperloop runs the algorithm's steps in several loops, each
	// threadblock going through all its steps once per loop. 0 runs one
	// loop of size / nchunksperloop chunks.
	ChunkBytes int64
}

type mscclGPU struct {
	ID  int
	TBs []mscclTB
}

type mscclTB struct {
	ID, Send, Recv, Chan int
	Steps                []mscclStep
	line                 int
}

type mscclStep struct {
	S, Cnt, DepTB, DepStep int
	Type                   string
	line                   int
}

// Step types: which carry a receive, which a send.
var mscclTypes = map[string][2]bool{ // {recv, send}
	"s": {false, true}, "r": {true, false}, "rcs": {true, true}, "rrs": {true, true},
	"rrc": {true, false}, "rrcs": {true, true}, "re": {false, false}, "cpy": {false, false}, "nop": {false, false},
}

// Applies reports whether the algorithm replaces op on n ranks.
func (a *MSCCLAlgo) Applies(op Op, n int) bool { return a.Coll == op && a.NGPUs == n }

// mscclDoc is an msccl-tools algorithm: <algo> holding <gpu>s holding
// <tb>s holding <step>s. The element bound is some eight times what a
// 64-GPU, 8-channel ring of 250 steps per threadblock holds (130k).
var mscclDoc = xmltree.Doc{Root: "algo", Kind: "an MSCCL algorithm (msccl-tools XML)", MaxElements: 1 << 20}

// ParseMSCCL reads an MSCCL XML algorithm. Errors name the file, line and
// element. Integers are read as MSCCL's strtol(s, NULL, 0) into an int does.
func ParseMSCCL(r io.Reader, name string) (*MSCCLAlgo, error) {
	root, err := mscclDoc.Read(r, name)
	if err != nil {
		return nil, err
	}
	a := &MSCCLAlgo{file: name}
	if err := a.algo(root); err != nil {
		return nil, err
	}
	if len(a.GPUs) != a.NGPUs {
		return nil, fmt.Errorf("%s: <algo> announces %d gpus, the file defines %d", name, a.NGPUs, len(a.GPUs))
	}
	// Dependencies must name existing steps.
	for _, g := range a.GPUs {
		for _, t := range g.TBs {
			for _, s := range t.Steps {
				if s.DepTB < 0 {
					continue
				}
				if s.DepTB >= len(g.TBs) || s.DepStep < 0 || s.DepStep >= len(g.TBs[s.DepTB].Steps) {
					return nil, &xmltree.Error{File: name, Line: s.line, Elem: "step",
						Msg: fmt.Sprintf("depends on step %d of threadblock %d of gpu %d, which does not exist", s.DepStep, s.DepTB, g.ID)}
				}
			}
		}
	}
	// Every send has its receive: count per (src, dst, channel).
	type conn struct{ src, dst, ch int }
	sends, recvs := map[conn]int{}, map[conn]int{}
	for _, g := range a.GPUs {
		for _, t := range g.TBs {
			for _, s := range t.Steps {
				k := mscclTypes[s.Type]
				if k[1] {
					sends[conn{g.ID, t.Send, t.Chan}]++
				}
				if k[0] {
					recvs[conn{t.Recv, g.ID, t.Chan}]++
				}
			}
		}
	}
	for c, n := range sends {
		if recvs[c] != n {
			return nil, fmt.Errorf("%s: gpu %d sends %d times to gpu %d on channel %d, which receives %d times", name, c.src, n, c.dst, c.ch, recvs[c])
		}
	}
	for c, n := range recvs {
		if sends[c] != n {
			return nil, fmt.Errorf("%s: gpu %d receives %d times from gpu %d on channel %d, which sends %d times", name, c.dst, n, c.src, c.ch, sends[c])
		}
	}
	return a, nil
}

func (a *MSCCLAlgo) algo(e *xmltree.Elem) error {
	a.Name, _ = e.Attr("name")
	coll, _ := e.Attr("coll")
	op, err := nccl.ParseOp(coll)
	if err != nil {
		return e.Errorf("attribute \"coll\": %v", err)
	}
	a.Coll = op
	if err := readInts(e, intAttr{"ngpus", &a.NGPUs}, intAttr{"nchannels", &a.Channels}, intAttr{"nchunksperloop", &a.ChunksLoop}); err != nil {
		return err
	}
	if a.NGPUs < 1 || a.Channels < 1 || a.ChunksLoop < 1 {
		return e.Errorf("ngpus, nchannels and nchunksperloop must be positive")
	}
	a.Proto = Simple
	if p, _ := e.Attr("proto"); p != "" {
		if a.Proto, err = nccl.ParseProto(p); err != nil {
			return e.Errorf("attribute \"proto\": %v", err)
		}
	}
	for _, k := range e.Kids {
		if err := a.walk(k, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// walk reads e and its subtree; gpu and tb are the enclosing <gpu> and
// <tb>, nil outside them. Elements MSCCL does not define are ignored, and
// what they hold is read as if in their place.
func (a *MSCCLAlgo) walk(e *xmltree.Elem, gpu *mscclGPU, tb *mscclTB) error {
	var err error
	switch e.Name {
	case "algo":
		return e.Errorf("inside <%s>: a file holds one <algo>", e.Parent.Name)
	case "gpu":
		if gpu != nil {
			return e.Errorf("inside <gpu>")
		}
		gpu, err = a.gpu(e)
	case "tb":
		switch {
		case gpu == nil:
			return e.Errorf("outside <gpu>")
		case tb != nil:
			return e.Errorf("inside <tb>")
		}
		tb, err = a.tb(e, gpu)
	case "step":
		if tb == nil {
			return e.Errorf("outside <tb>")
		}
		err = step(e, tb)
	}
	if err != nil {
		return err
	}
	for _, k := range e.Kids {
		if err := a.walk(k, gpu, tb); err != nil {
			return err
		}
	}
	return nil
}

func (a *MSCCLAlgo) gpu(e *xmltree.Elem) (*mscclGPU, error) {
	id, err := e.Int("id", true, 0)
	if err != nil {
		return nil, err
	}
	if id != len(a.GPUs) || id >= a.NGPUs {
		return nil, e.Errorf("id %d: gpus must be numbered 0..%d in order", id, a.NGPUs-1)
	}
	a.GPUs = append(a.GPUs, mscclGPU{ID: id})
	return &a.GPUs[len(a.GPUs)-1], nil
}

func (a *MSCCLAlgo) tb(e *xmltree.Elem, gpu *mscclGPU) (*mscclTB, error) {
	t := mscclTB{line: e.Line}
	if err := readInts(e, intAttr{"id", &t.ID}, intAttr{"send", &t.Send}, intAttr{"recv", &t.Recv}, intAttr{"chan", &t.Chan}); err != nil {
		return nil, err
	}
	if t.ID != len(gpu.TBs) {
		return nil, e.Errorf("id %d: threadblocks must be numbered from 0 in order", t.ID)
	}
	for _, peer := range []int{t.Send, t.Recv} {
		if peer < -1 || peer >= a.NGPUs || peer == gpu.ID {
			return nil, e.Errorf("peer %d is not another GPU of 0..%d", peer, a.NGPUs-1)
		}
	}
	if t.Chan < 0 || t.Chan >= a.Channels {
		return nil, e.Errorf("chan %d outside 0..%d", t.Chan, a.Channels-1)
	}
	gpu.TBs = append(gpu.TBs, t)
	return &gpu.TBs[len(gpu.TBs)-1], nil
}

func step(e *xmltree.Elem, tb *mscclTB) error {
	s := mscclStep{line: e.Line}
	s.Type, _ = e.Attr("type")
	kind, ok := mscclTypes[s.Type]
	if !ok {
		return e.Errorf("unknown type %q (s, r, rcs, rrs, rrc, rrcs, re, cpy, nop)", s.Type)
	}
	if err := readInts(e, intAttr{"s", &s.S}, intAttr{"cnt", &s.Cnt}, intAttr{"depid", &s.DepTB}, intAttr{"deps", &s.DepStep}); err != nil {
		return err
	}
	switch {
	case s.S != len(tb.Steps):
		return e.Errorf("s=%d: steps must be numbered from 0 in order", s.S)
	case s.Cnt < 0:
		return e.Errorf("negative cnt %d", s.Cnt)
	case kind[0] && tb.Recv < 0:
		return e.Errorf("type %s receives but its <tb> has recv=-1", s.Type)
	case kind[1] && tb.Send < 0:
		return e.Errorf("type %s sends but its <tb> has send=-1", s.Type)
	}
	tb.Steps = append(tb.Steps, s)
	return nil
}

type intAttr struct {
	name string
	dst  *int
}

// readInts reads integer attributes that must be present.
func readInts(e *xmltree.Elem, attrs ...intAttr) error {
	for _, at := range attrs {
		v, err := e.Int(at.name, true, 0)
		if err != nil {
			return err
		}
		*at.dst = v
	}
	return nil
}

// Emit decomposes the algorithm for one collective: every send step
// becomes a flow of cnt chunks; a step starts when the previous step of
// its threadblock and its explicit dependency are done and, if it
// receives, when the matching send (the k-th on that connection) arrived.
//
// With ChunkBytes set, the steps repeat once per loop: step v of a
// threadblock is step v mod n of loop v / n (n its steps), a dependency
// names the step of the same loop, and the k-th receive on a connection
// still matches its k-th send.
func (a *MSCCLAlgo) Emit(c *cctx, size int64) error {
	cl := int64(a.ChunksLoop)
	per := (size + cl - 1) / cl // one loop's chunk
	loops := int64(1)
	if a.ChunkBytes > 0 && per > a.ChunkBytes {
		per = a.ChunkBytes
		loops = (size + per*cl - 1) / (per * cl)
		if loops*int64(a.maxSteps()) > 1<<24 {
			return fmt.Errorf("%s: %d loops of %d-byte chunks would be more than %d steps per threadblock: raise the chunk size", a.file, loops, per, 1<<24)
		}
	}
	// chunk is loop k's chunk: full ones, then what is left.
	chunk := func(k int64) int64 { return min(per, (size-k*per*cl+cl-1)/cl) }
	L := int(loops)
	type ref struct{ g, t, s int }
	type conn struct{ src, dst, ch int }
	done := map[ref][]int64{} // step -> flows whose completion completes it
	sendFlow := map[ref]int64{}
	// The k-th send of a connection, for matching receives.
	sendOf := map[conn][]ref{}
	for gi, g := range a.GPUs {
		for ti, t := range g.TBs {
			for si := range L * len(t.Steps) {
				if mscclTypes[t.Steps[si%len(t.Steps)].Type][1] {
					k := conn{gi, t.Send, t.Chan}
					sendOf[k] = append(sendOf[k], ref{gi, ti, si})
				}
			}
		}
	}
	recvIdx := map[conn]int{}
	matched := map[ref]ref{} // recv step -> send step
	for gi, g := range a.GPUs {
		for ti, t := range g.TBs {
			for si := range L * len(t.Steps) {
				if mscclTypes[t.Steps[si%len(t.Steps)].Type][0] {
					k := conn{t.Recv, gi, t.Chan}
					matched[ref{gi, ti, si}] = sendOf[k][recvIdx[k]]
					recvIdx[k]++
				}
			}
		}
	}
	// Process steps once their prerequisites are processed; a full pass
	// without progress means a dependency cycle.
	next := make([][]int, len(a.GPUs))
	remaining := 0
	for gi, g := range a.GPUs {
		next[gi] = make([]int, len(g.TBs))
		for _, t := range g.TBs {
			remaining += L * len(t.Steps)
		}
	}
	for remaining > 0 {
		progress := false
		for gi, g := range a.GPUs {
			for ti, t := range g.TBs {
				for next[gi][ti] < L*len(t.Steps) {
					si := next[gi][ti]
					s := t.Steps[si%len(t.Steps)]
					loop := si / len(t.Steps)
					kind := mscclTypes[s.Type]
					var deps []int64
					if si == 0 {
						deps = append(deps, c.entry[gi]...)
					} else {
						deps = append(deps, done[ref{gi, ti, si - 1}]...)
					}
					if s.DepTB >= 0 {
						d, ok := done[ref{gi, s.DepTB, loop*len(g.TBs[s.DepTB].Steps) + s.DepStep}]
						if !ok {
							break
						}
						deps = union(deps, d)
					}
					var in int64 = -1
					if kind[0] {
						sr := matched[ref{gi, ti, si}]
						f, ok := sendFlow[sr]
						if !ok {
							break
						}
						in = f
					}
					r := ref{gi, ti, si}
					switch {
					case kind[1]:
						if in >= 0 {
							deps = union(deps, []int64{in})
						}
						id := c.e.Flow(c.id, c.ranks[gi], c.ranks[t.Send], wire(int64(s.Cnt)*chunk(int64(loop)), a.Proto), c.hop(c.ranks[gi], c.ranks[t.Send]), deps, int32(t.Chan), int32(si), int32(L*len(t.Steps)), stream.ConnMSCCL)
						sendFlow[r] = id
						done[r] = []int64{id}
					case kind[0]:
						done[r] = union(deps, []int64{in})
					default:
						done[r] = deps
					}
					next[gi][ti]++
					remaining--
					progress = true
				}
			}
		}
		if !progress {
			for gi, g := range a.GPUs {
				for ti, t := range g.TBs {
					if si := next[gi][ti]; si < L*len(t.Steps) {
						return fmt.Errorf("%s: line %d: gpu %d threadblock %d step %d waits in a dependency cycle", a.file, t.Steps[si%len(t.Steps)].line, gi, ti, si%len(t.Steps))
					}
				}
			}
		}
	}
	for gi, g := range a.GPUs {
		for ti, t := range g.TBs {
			if len(t.Steps) > 0 {
				c.exit[gi] = union(c.exit[gi], done[ref{gi, ti, L*len(t.Steps) - 1}])
			}
		}
	}
	return nil
}

// maxSteps is the most steps a threadblock has.
func (a *MSCCLAlgo) maxSteps() int {
	n := 1
	for _, g := range a.GPUs {
		for _, t := range g.TBs {
			n = max(n, len(t.Steps))
		}
	}
	return n
}
