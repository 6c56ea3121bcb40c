package traffic

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Matrix is an htsim connection matrix read into messages.
type Matrix struct {
	Nodes    int
	Messages []Message // in dependency order
	Warnings []string
}

// cmConn is one connection line while the matrix is read.
type cmConn struct {
	line           int
	src, dst       int32
	size           int64
	id             int64
	start          int64 // ps, -1 when triggered
	trigger        int64
	sendDone, recv int64
}

type cmTrigger struct {
	line  int // declaration, 0 while only referenced
	ref   int // first line referring to it
	kind  string
	count int
}

// ReadHtsim reads htsim's connection-matrix format (.cm): header lines
// "Nodes N", "Connections M" and optionally "Triggers T"; connection lines
// "src->dst id N (start T | trigger N) size B [send_done_trigger N]
// [recv_done_trigger N] [prio P]" with T in picoseconds, as htsim reads it;
// trigger lines "trigger id N oneshot|multishot|barrier [count C]". Host i
// is GPU i of the topology (gpus GPUs). A flow started by a trigger depends
// on the flows whose send_done_trigger or recv_done_trigger name it; both
// become the flow's completion, the only end a dependency has here. A
// oneshot trigger fires on its first activation and a multishot one starts
// one target per activation, which a dependency on all activators cannot
// express: such a trigger is refused unless it has one activator (and, for
// multishot, one target). A barrier's count must equal its activators.
func ReadHtsim(r io.Reader, file string, gpus int) (*Matrix, error) {
	lineErr := func(line int, field string, format string, args ...any) error {
		return &topo.LineError{File: file, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
	}
	m := &Matrix{Nodes: -1}
	header := map[string]int{}
	headerLine := map[string]int{}
	var conns []cmConn
	ids := map[int64]int{}
	trigs := map[int64]*cmTrigger{}
	var trigOrder []int64
	trigRef := func(id int64, line int) *cmTrigger {
		t := trigs[id]
		if t == nil {
			t = &cmTrigger{ref: line}
			trigs[id] = t
			trigOrder = append(trigOrder, id)
		}
		return t
	}
	prio := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		tok := strings.Fields(sc.Text())
		if len(tok) == 0 || strings.HasPrefix(tok[0], "#") {
			continue
		}
		switch {
		case strings.Contains(tok[0], "->"):
			if m.Nodes < 0 {
				return nil, lineErr(n, "Nodes", "a connection before the Nodes line")
			}
			c, err := parseConn(tok, n, m.Nodes, lineErr)
			if err != nil {
				return nil, err
			}
			if len(conns) >= MaxMessages {
				return nil, lineErr(n, "", "more than %d connections", MaxMessages)
			}
			if c.id != 0 {
				if prev, dup := ids[c.id]; dup {
					return nil, lineErr(n, "id", "id %d is also the flow of line %d", c.id, conns[prev].line)
				}
				ids[c.id] = len(conns)
			}
			if c.trigger != 0 {
				trigRef(c.trigger, n)
			}
			for _, t := range []int64{c.sendDone, c.recv} {
				if t != 0 {
					trigRef(t, n)
				}
			}
			if c.id == 0 && c.trigger != 0 {
				return nil, lineErr(n, "id", "a triggered flow needs an id, as in htsim")
			}
			prio = prio || strings.Contains(sc.Text(), " prio ")
			conns = append(conns, c)
		case tok[0] == "trigger":
			var id int64
			kind, count := "", 0
			for i := 1; i < len(tok); i++ {
				switch tok[i] {
				case "id", "count":
					if i+1 >= len(tok) {
						return nil, lineErr(n, tok[i], "no value")
					}
					v, err := strconv.ParseInt(tok[i+1], 10, 64)
					if err != nil || v <= 0 || v > math.MaxInt32 {
						return nil, lineErr(n, tok[i], "%q is not a positive integer", tok[i+1])
					}
					if tok[i] == "id" {
						id = v
					} else {
						count = int(v)
					}
					i++
				case "oneshot", "multishot", "barrier":
					if kind != "" {
						return nil, lineErr(n, tok[i], "a trigger of two kinds (%s and %s)", kind, tok[i])
					}
					kind = tok[i]
				default:
					return nil, lineErr(n, tok[i], "unknown trigger attribute (id, oneshot, multishot, barrier, count)")
				}
			}
			if id == 0 {
				return nil, lineErr(n, "id", "a trigger without an id")
			}
			if kind == "" {
				return nil, lineErr(n, "type", "trigger %d has no type (oneshot, multishot or barrier)", id)
			}
			t := trigRef(id, n)
			if t.line != 0 {
				return nil, lineErr(n, "id", "trigger %d is also declared on line %d", id, t.line)
			}
			t.line, t.kind, t.count = n, kind, count
		case tok[0] == "Nodes" || tok[0] == "Connections" || tok[0] == "Triggers" || tok[0] == "Failures":
			if len(tok) != 2 {
				return nil, lineErr(n, tok[0], "want %q followed by a count", tok[0])
			}
			v, err := strconv.Atoi(tok[1])
			if err != nil || v < 0 {
				return nil, lineErr(n, tok[0], "%q is not a count", tok[1])
			}
			if _, dup := header[tok[0]]; dup {
				return nil, lineErr(n, tok[0], "given twice (line %d)", headerLine[tok[0]])
			}
			header[tok[0]], headerLine[tok[0]] = v, n
			switch tok[0] {
			case "Nodes":
				if v < 2 || v > gpus {
					return nil, lineErr(n, "Nodes", "%d hosts, the topology has %d GPUs (host i is GPU i)", v, gpus)
				}
				m.Nodes = v
			case "Failures":
				if v > 0 {
					return nil, lineErr(n, "Failures", "link failures in a matrix are not supported: fail links with flowsim-packet's LINK_DOWN")
				}
			}
		default:
			return nil, lineErr(n, tok[0], "unknown line (Nodes, Connections, Triggers, src->dst ..., trigger ...)")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if m.Nodes < 0 {
		return nil, fmt.Errorf("%s: no Nodes line", file)
	}
	if want, ok := header["Connections"]; !ok || want != len(conns) {
		if !ok {
			return nil, fmt.Errorf("%s: no Connections line", file)
		}
		return nil, lineErr(headerLine["Connections"], "Connections", "%d announced, %d in the file", want, len(conns))
	}
	if len(conns) == 0 { // an empty stream would read as a run of nothing
		return nil, lineErr(headerLine["Connections"], "Connections", "0 connections: the matrix sends nothing")
	}
	declared := 0
	for _, t := range trigs {
		if t.line != 0 {
			declared++
		}
	}
	if want := header["Triggers"]; want != declared {
		return nil, lineErr(max(headerLine["Triggers"], 1), "Triggers", "%d announced, %d declared", want, declared)
	}
	if prio {
		m.Warnings = append(m.Warnings, file+": prio is read and ignored: flows have no priority classes here")
	}
	return m, m.order(conns, trigs, trigOrder, lineErr)
}

// parseConn reads one connection line.
func parseConn(tok []string, n, nodes int, lineErr func(int, string, string, ...any) error) (cmConn, error) {
	c := cmConn{line: n, start: -1}
	ends := strings.SplitN(tok[0], "->", 2)
	for i, s := range ends {
		v, err := strconv.Atoi(s)
		field := [2]string{"src", "dst"}[i]
		if err != nil || v < 0 || v >= nodes {
			return c, lineErr(n, field, "%q is not a host 0-%d", s, nodes-1)
		}
		if i == 0 {
			c.src = int32(v)
		} else {
			c.dst = int32(v)
		}
	}
	if c.src == c.dst {
		return c, lineErr(n, "dst", "host %d sends to itself", c.src)
	}
	seen := map[string]bool{}
	for i := 1; i < len(tok); i += 2 {
		key := tok[i]
		if i+1 >= len(tok) {
			return c, lineErr(n, key, "no value")
		}
		if seen[key] {
			return c, lineErr(n, key, "given twice")
		}
		seen[key] = true
		val := tok[i+1]
		switch key {
		case "start":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || !(f >= 0) || f > 1<<56 {
				return c, lineErr(n, key, "%q is not a start time in picoseconds", val)
			}
			c.start = int64(math.Round(f))
		case "size", "id", "trigger", "send_done_trigger", "recv_done_trigger", "prio":
			v, err := strconv.ParseInt(val, 10, 64)
			if err != nil || v < 0 || (v == 0 && key != "prio") {
				return c, lineErr(n, key, "%q is not a positive integer", val)
			}
			switch key {
			case "size":
				if v > 1<<40 {
					return c, lineErr(n, key, "%d bytes: at most 1 TiB", v)
				}
				c.size = v
			case "id":
				c.id = v
			case "trigger":
				c.trigger = v
			case "send_done_trigger":
				c.sendDone = v
			case "recv_done_trigger":
				c.recv = v
			}
		default:
			return c, lineErr(n, key, "unknown connection attribute (id, start, trigger, size, send_done_trigger, recv_done_trigger, prio)")
		}
	}
	switch {
	case c.size == 0:
		return c, lineErr(n, "size", "missing")
	case c.start < 0 && c.trigger == 0:
		return c, lineErr(n, "start", "neither a start time nor a trigger")
	case c.start >= 0 && c.trigger != 0:
		return c, lineErr(n, "trigger", "both a start time and a trigger")
	}
	return c, nil
}

// order checks the triggers and lists the connections as messages, each
// after the ones that trigger it (Kahn's algorithm; a cycle is an error).
func (m *Matrix) order(conns []cmConn, trigs map[int64]*cmTrigger, trigOrder []int64, lineErr func(int, string, string, ...any) error) error {
	activators := map[int64][]int{}
	targets := map[int64][]int{}
	for i, c := range conns {
		for _, t := range []int64{c.sendDone, c.recv} {
			if t != 0 && (len(activators[t]) == 0 || activators[t][len(activators[t])-1] != i) {
				activators[t] = append(activators[t], i)
			}
		}
		if c.trigger != 0 {
			targets[c.trigger] = append(targets[c.trigger], i)
		}
	}
	for _, id := range trigOrder {
		t := trigs[id]
		act, tgt := activators[id], targets[id]
		switch {
		case t.line == 0:
			return lineErr(t.ref, "trigger", "trigger %d is used but never declared", id)
		case len(tgt) > 0 && len(act) == 0:
			return lineErr(t.line, "id", "trigger %d never fires: no flow names it as send_done_trigger or recv_done_trigger", id)
		case t.kind == "oneshot" && len(act) > 1:
			return lineErr(t.line, "oneshot", "trigger %d fires on the first of %d activating flows (lines %d and %d ...), which dependencies on all of them cannot express: make it a barrier with count %d", id, len(act), conns[act[0]].line, conns[act[1]].line, len(act))
		case t.kind == "multishot" && (len(act) > 1 || len(tgt) > 1):
			return lineErr(t.line, "multishot", "trigger %d starts one of its %d flows per activation, in activation order, which a static dependency graph cannot express", id, len(tgt))
		case t.kind == "barrier" && t.count != len(act):
			return lineErr(t.line, "count", "barrier %d waits for %d activations, %d flows activate it", id, t.count, len(act))
		}
	}
	// waits[i]: connections i waits for.
	indeg := make([]int, len(conns))
	next := make([][]int, len(conns))
	for i, c := range conns {
		if c.trigger != 0 {
			for _, a := range activators[c.trigger] {
				next[a] = append(next[a], i)
				indeg[i]++
			}
		}
	}
	pos := make([]int32, len(conns))
	queue := make([]int, 0, len(conns))
	for i := range conns {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	m.Messages = make([]Message, 0, len(conns))
	for h := 0; h < len(queue); h++ {
		i := queue[h]
		c := conns[i]
		msg := Message{Src: c.src, Dst: c.dst, Size: c.size, StartPs: max(c.start, 0)}
		if c.trigger != 0 {
			for _, a := range activators[c.trigger] {
				msg.After = append(msg.After, pos[a])
			}
		}
		pos[i] = int32(len(m.Messages))
		m.Messages = append(m.Messages, msg)
		for _, j := range next[i] {
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if len(m.Messages) < len(conns) {
		for i := range conns {
			if indeg[i] > 0 {
				return lineErr(conns[i].line, "trigger", "the flow waits, through its triggers, for itself")
			}
		}
	}
	return nil
}
