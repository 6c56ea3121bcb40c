package collective

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
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

// ParseMSCCL reads an MSCCL XML algorithm. Errors name the file, line and element.
func ParseMSCCL(r io.Reader, name string) (*MSCCLAlgo, error) {
	d := xml.NewDecoder(r)
	a := &MSCCLAlgo{file: name}
	bad := func(line int, elem, format string, args ...any) error {
		return fmt.Errorf("%s: line %d: <%s> %s", name, line, elem, fmt.Sprintf(format, args...))
	}
	var gpu *mscclGPU
	var tb *mscclTB
	seenAlgo := false
	for {
		line, _ := d.InputPos()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, fmt.Errorf("%s: line %d: %s", name, se.Line, se.Msg)
			}
			return nil, fmt.Errorf("%s: line %d: %v", name, line, err)
		}
		line, _ = d.InputPos()
		switch t := tok.(type) {
		case xml.StartElement:
			attr := func(key string) (int, error) {
				for _, at := range t.Attr {
					if at.Name.Local == key {
						v, err := strconv.Atoi(strings.TrimSpace(at.Value))
						if err != nil {
							return 0, bad(line, t.Name.Local, "attribute %q: %q is not an integer", key, at.Value)
						}
						return v, nil
					}
				}
				return 0, bad(line, t.Name.Local, "missing attribute %q", key)
			}
			str := func(key string) string {
				for _, at := range t.Attr {
					if at.Name.Local == key {
						return at.Value
					}
				}
				return ""
			}
			switch t.Name.Local {
			case "algo":
				seenAlgo = true
				a.Name = str("name")
				op, err := ParseOp(str("coll"))
				if err != nil {
					return nil, bad(line, "algo", "attribute \"coll\": %v", err)
				}
				a.Coll = op
				if a.NGPUs, err = attr("ngpus"); err != nil {
					return nil, err
				}
				if a.Channels, err = attr("nchannels"); err != nil {
					return nil, err
				}
				if a.ChunksLoop, err = attr("nchunksperloop"); err != nil {
					return nil, err
				}
				if a.NGPUs < 1 || a.Channels < 1 || a.ChunksLoop < 1 {
					return nil, bad(line, "algo", "ngpus, nchannels and nchunksperloop must be positive")
				}
				a.Proto = Simple
				if p := str("proto"); p != "" {
					if a.Proto, err = ParseProto(p); err != nil {
						return nil, bad(line, "algo", "attribute \"proto\": %v", err)
					}
				}
			case "gpu":
				if !seenAlgo {
					return nil, bad(line, "gpu", "outside <algo>")
				}
				id, err := attr("id")
				if err != nil {
					return nil, err
				}
				if id != len(a.GPUs) || id >= a.NGPUs {
					return nil, bad(line, "gpu", "id %d: gpus must be numbered 0..%d in order", id, a.NGPUs-1)
				}
				a.GPUs = append(a.GPUs, mscclGPU{ID: id})
				gpu = &a.GPUs[len(a.GPUs)-1]
			case "tb":
				if gpu == nil {
					return nil, bad(line, "tb", "outside <gpu>")
				}
				var nt mscclTB
				nt.line = line
				for _, k := range []struct {
					key string
					dst *int
				}{{"id", &nt.ID}, {"send", &nt.Send}, {"recv", &nt.Recv}, {"chan", &nt.Chan}} {
					if *k.dst, err = attr(k.key); err != nil {
						return nil, err
					}
				}
				if nt.ID != len(gpu.TBs) {
					return nil, bad(line, "tb", "id %d: threadblocks must be numbered from 0 in order", nt.ID)
				}
				for _, peer := range []int{nt.Send, nt.Recv} {
					if peer < -1 || peer >= a.NGPUs || peer == gpu.ID {
						return nil, bad(line, "tb", "peer %d is not another GPU of 0..%d", peer, a.NGPUs-1)
					}
				}
				if nt.Chan < 0 || nt.Chan >= a.Channels {
					return nil, bad(line, "tb", "chan %d outside 0..%d", nt.Chan, a.Channels-1)
				}
				gpu.TBs = append(gpu.TBs, nt)
				tb = &gpu.TBs[len(gpu.TBs)-1]
			case "step":
				if tb == nil {
					return nil, bad(line, "step", "outside <tb>")
				}
				var st mscclStep
				st.line = line
				st.Type = str("type")
				kind, ok := mscclTypes[st.Type]
				if !ok {
					return nil, bad(line, "step", "unknown type %q (s, r, rcs, rrs, rrc, rrcs, re, cpy, nop)", st.Type)
				}
				for _, k := range []struct {
					key string
					dst *int
				}{{"s", &st.S}, {"cnt", &st.Cnt}, {"depid", &st.DepTB}, {"deps", &st.DepStep}} {
					if *k.dst, err = attr(k.key); err != nil {
						return nil, err
					}
				}
				if st.S != len(tb.Steps) {
					return nil, bad(line, "step", "s=%d: steps must be numbered from 0 in order", st.S)
				}
				if st.Cnt < 0 {
					return nil, bad(line, "step", "negative cnt %d", st.Cnt)
				}
				if kind[0] && tb.Recv < 0 {
					return nil, bad(line, "step", "type %s receives but its <tb> has recv=-1", st.Type)
				}
				if kind[1] && tb.Send < 0 {
					return nil, bad(line, "step", "type %s sends but its <tb> has send=-1", st.Type)
				}
				tb.Steps = append(tb.Steps, st)
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "tb":
				tb = nil
			case "gpu":
				gpu = nil
			}
		}
	}
	if !seenAlgo {
		return nil, fmt.Errorf("%s: no <algo> element", name)
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
					return nil, bad(s.line, "step", "depends on step %d of threadblock %d of gpu %d, which does not exist", s.DepStep, s.DepTB, g.ID)
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

// Emit decomposes the algorithm for one collective: every send step
// becomes a flow of cnt chunks; a step starts when the previous step of
// its threadblock and its explicit dependency are done and, if it
// receives, when the matching send (the k-th on that connection) arrived.
func (a *MSCCLAlgo) Emit(c *cctx, size int64) error {
	chunk := (size + int64(a.ChunksLoop) - 1) / int64(a.ChunksLoop)
	type ref struct{ g, t, s int }
	type conn struct{ src, dst, ch int }
	done := map[ref][]int64{} // step -> flows whose completion completes it
	sendFlow := map[ref]int64{}
	// The k-th send of a connection, for matching receives.
	sendOf := map[conn][]ref{}
	for gi, g := range a.GPUs {
		for ti, t := range g.TBs {
			for si, s := range t.Steps {
				if mscclTypes[s.Type][1] {
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
			for si, s := range t.Steps {
				if mscclTypes[s.Type][0] {
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
			remaining += len(t.Steps)
		}
	}
	for remaining > 0 {
		progress := false
		for gi, g := range a.GPUs {
			for ti, t := range g.TBs {
				for next[gi][ti] < len(t.Steps) {
					si := next[gi][ti]
					s := t.Steps[si]
					kind := mscclTypes[s.Type]
					var deps []int64
					if si == 0 {
						deps = append(deps, c.entry[gi]...)
					} else {
						deps = append(deps, done[ref{gi, ti, si - 1}]...)
					}
					if s.DepTB >= 0 {
						d, ok := done[ref{gi, s.DepTB, s.DepStep}]
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
						id := c.e.Flow(c.id, c.ranks[gi], c.ranks[t.Send], wire(int64(s.Cnt)*chunk, a.Proto), deps, int32(t.Chan), int32(si), int32(len(t.Steps)), stream.ConnMSCCL)
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
					if si := next[gi][ti]; si < len(t.Steps) {
						return fmt.Errorf("%s: line %d: gpu %d threadblock %d step %d waits in a dependency cycle", a.file, t.Steps[si].line, gi, ti, si)
					}
				}
			}
		}
	}
	for gi, g := range a.GPUs {
		for ti, t := range g.TBs {
			if len(t.Steps) > 0 {
				c.exit[gi] = union(c.exit[gi], done[ref{gi, ti, len(t.Steps) - 1}])
			}
		}
	}
	return nil
}
