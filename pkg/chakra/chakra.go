// Package chakra reads and writes Chakra execution traces (MLCommons
// Chakra's ET, ASTRA-sim's workload input): one file per rank, a sequence
// of varint-length-delimited protobuf messages, a GlobalMetadata and then
// Nodes, optionally gzipped. The protobuf types are generated from
// Chakra's schema (package etpb); framing goes through protodelim.
package chakra

import (
	"bufio"

	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
)

// Kind is what a node does, of the node types fabricsim runs.
type Kind int

const (
	Comp Kind = iota // COMP_NODE: a delay of Duration on its rank
	Coll             // COMM_COLL_NODE: a collective over its group
	Send             // COMM_SEND_NODE
	Recv             // COMM_RECV_NODE
)

func (k Kind) String() string {
	return [...]string{"COMP", "COMM_COLL", "COMM_SEND", "COMM_RECV"}[k]
}

// Node is one Chakra node with the attributes fabricsim uses, each
// integer attribute read from whichever integer variant the file used.
type Node struct {
	Index    int // the record's place in its file: 0 is the GlobalMetadata, nodes from 1
	ID       uint64
	Name     string
	Kind     Kind
	CtrlDeps []uint64
	DataDeps []uint64

	DurationMicros uint64
	DurationPs     int64 // fabricsim's exact duration (attribute fabricsim.duration_ps), 0 if absent

	CommType    etpb.CollectiveCommType
	HasComm     bool // comm_type given
	CommSize    int64
	CommSrc     int64
	CommDst     int64
	CommTag     int64
	HasSrc      bool
	HasDst      bool
	PGName      string
	GroupType   string // fabricsim.group_type: TP, DP, ... ("" if absent)
	IsCPUOp     bool
	NumOps      int64
	TensorSize  int64
	InvolvedDim []bool
}

// Deps are the node's ctrl_deps then its data_deps, each once.
func (n *Node) Deps() []uint64 {
	out := make([]uint64, 0, len(n.CtrlDeps)+len(n.DataDeps))
	seen := make(map[uint64]bool, cap(out))
	for _, l := range [][]uint64{n.CtrlDeps, n.DataDeps} {
		for _, d := range l {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// DurationPicos is the node's compute time in picoseconds: fabricsim's
// exact attribute when present, else duration_micros.
func (n *Node) DurationPicos() int64 {
	if n.DurationPs > 0 {
		return n.DurationPs
	}
	return int64(n.DurationMicros) * 1_000_000
}

// Trace is one rank's execution trace.
type Trace struct {
	File    string
	Version string // GlobalMetadata's version
	Nodes   []Node
	// Skipped counts nodes of types fabricsim does not run (MEM_LOAD,
	// MEM_STORE, METADATA), by type name; they are dropped and the
	// dependencies through them kept (see Read).
	Skipped map[string]int
}

// Error names the file, the record (its index and, for a node, its id)
// and the field of bad input.
type Error struct {
	File   string
	Record int // -1: the file as a whole
	NodeID *uint64
	Field  string
	Err    error
}

func (e *Error) Error() string {
	s := e.File
	if e.Record >= 0 {
		s += fmt.Sprintf(": record %d", e.Record)
		if e.NodeID != nil {
			s += fmt.Sprintf(" (node id %d)", *e.NodeID)
		}
	}
	if e.Field != "" {
		s += ", field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// MaxRecord bounds one message (Chakra's own nodes are far smaller).
const MaxRecord = 64 << 20

// ReadFile reads one rank's ET file.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads an ET from r (gzipped or not: the 1f 8b header tells).
// Nodes of skipped types pass their dependencies on to the nodes that
// depend on them, so no ordering is lost.
func Read(r io.Reader, name string) (*Trace, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &Error{File: name, Record: -1, Err: fmt.Errorf("gzip header: %v", err)}
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	opt := protodelim.UnmarshalOptions{MaxSize: MaxRecord}
	t := &Trace{File: name, Skipped: map[string]int{}}
	var meta etpb.GlobalMetadata
	if err := opt.UnmarshalFrom(br, &meta); err != nil {
		if err == io.EOF {
			return nil, &Error{File: name, Record: -1, Err: errors.New("empty file: no GlobalMetadata record")}
		}
		return nil, &Error{File: name, Record: 0, Field: "GlobalMetadata", Err: recordErr(err)}
	}
	t.Version = meta.GetVersion()
	skipped := map[uint64][]uint64{} // a skipped node's deps, by its id
	ids := map[uint64]int{}
	for idx := 1; ; idx++ {
		var pb etpb.Node
		if err := opt.UnmarshalFrom(br, &pb); err != nil {
			if err == io.EOF {
				break
			}
			return nil, &Error{File: name, Record: idx, Field: "Node", Err: recordErr(err)}
		}
		id := pb.GetId()
		bad := func(field string, format string, a ...any) error {
			return &Error{File: name, Record: idx, NodeID: &id, Field: field, Err: fmt.Errorf(format, a...)}
		}
		n := Node{Index: idx, ID: id, Name: pb.GetName(), CtrlDeps: pb.GetCtrlDeps(), DataDeps: pb.GetDataDeps(), DurationMicros: pb.GetDurationMicros()}
		switch pb.GetType() {
		case etpb.NodeType_COMP_NODE:
			n.Kind = Comp
		case etpb.NodeType_COMM_COLL_NODE:
			n.Kind = Coll
		case etpb.NodeType_COMM_SEND_NODE:
			n.Kind = Send
		case etpb.NodeType_COMM_RECV_NODE:
			n.Kind = Recv
		case etpb.NodeType_MEM_LOAD_NODE, etpb.NodeType_MEM_STORE_NODE, etpb.NodeType_METADATA_NODE:
			t.Skipped[pb.GetType().String()]++
			skipped[id] = n.Deps()
			continue
		default:
			return nil, bad("type", "node type %d is not one Chakra defines for a run (COMP, COMM_COLL, COMM_SEND, COMM_RECV, MEM_LOAD, MEM_STORE, METADATA)", int32(pb.GetType()))
		}
		if prev, ok := ids[id]; ok {
			return nil, bad("id", "node id %d again (first at record %d)", id, prev)
		}
		ids[id] = idx
		if err := n.attrs(pb.GetAttr()); err != nil {
			var ae *attrError
			if errors.As(err, &ae) {
				return nil, bad("attr "+ae.name, "%v", ae.err)
			}
			return nil, bad("attr", "%v", err)
		}
		if err := n.check(); err != nil {
			var ae *attrError
			errors.As(err, &ae)
			return nil, bad(ae.name, "%v", ae.err)
		}
		t.Nodes = append(t.Nodes, n)
	}
	if len(skipped) > 0 {
		t.bridge(skipped)
	}
	return t, nil
}

// bridge replaces each dependency on a skipped node by that node's own
// dependencies (transitively, each skipped node resolved once; a cycle
// of skipped nodes resolves to nothing).
func (t *Trace) bridge(skipped map[uint64][]uint64) {
	memo := map[uint64][]uint64{}
	busy := map[uint64]bool{}
	var resolve func(id uint64) []uint64
	resolve = func(id uint64) []uint64 {
		deps, ok := skipped[id]
		if !ok {
			return []uint64{id}
		}
		if r, ok := memo[id]; ok {
			return r
		}
		if busy[id] {
			return nil
		}
		busy[id] = true
		var out []uint64
		seen := map[uint64]bool{}
		for _, d := range deps {
			for _, x := range resolve(d) {
				if !seen[x] {
					seen[x] = true
					out = append(out, x)
				}
			}
		}
		busy[id] = false
		memo[id] = out
		return out
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		for _, l := range []*[]uint64{&n.CtrlDeps, &n.DataDeps} {
			var out []uint64
			for _, d := range *l {
				out = append(out, resolve(d)...)
			}
			*l = out
		}
	}
}

func recordErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated: the file ends inside this record")
	}
	var se *protodelim.SizeTooLargeError
	if errors.As(err, &se) {
		return fmt.Errorf("record of %d bytes, beyond the %d a node may take", se.Size, MaxRecord)
	}
	return err
}

type attrError struct {
	name string
	err  error
}

func (e *attrError) Error() string { return e.name + ": " + e.err.Error() }

// attrs reads the attributes fabricsim uses.
func (n *Node) attrs(attrs []*etpb.AttributeProto) error {
	for _, a := range attrs {
		name := a.GetName()
		var err error
		switch name {
		case "comm_type":
			var v int64
			if v, err = intAttr(a); err == nil {
				if _, ok := etpb.CollectiveCommType_name[int32(v)]; !ok || v != int64(int32(v)) {
					err = fmt.Errorf("%d is not a Chakra collective type", v)
				}
				n.CommType, n.HasComm = etpb.CollectiveCommType(v), true
			}
		case "comm_size":
			n.CommSize, err = intAttr(a)
			if err == nil && n.CommSize < 0 {
				err = fmt.Errorf("%d bytes", n.CommSize)
			}
		case "comm_src":
			n.CommSrc, err = intAttr(a)
			n.HasSrc = true
		case "comm_dst":
			n.CommDst, err = intAttr(a)
			n.HasDst = true
		case "comm_tag":
			n.CommTag, err = intAttr(a)
		case "pg_name":
			n.PGName, err = stringAttr(a)
		case "fabricsim.group_type":
			n.GroupType, err = stringAttr(a)
		case "fabricsim.duration_ps":
			n.DurationPs, err = intAttr(a)
			if err == nil && n.DurationPs < 0 {
				err = fmt.Errorf("%d ps", n.DurationPs)
			}
		case "is_cpu_op":
			var v int64
			if b, ok := a.GetValue().(*etpb.AttributeProto_BoolVal); ok {
				n.IsCPUOp = b.BoolVal
			} else if v, err = intAttr(a); err == nil {
				n.IsCPUOp = v != 0
			}
		case "num_ops":
			n.NumOps, err = intAttr(a)
		case "tensor_size":
			n.TensorSize, err = intAttr(a)
		case "involved_dim":
			n.InvolvedDim, err = boolList(a)
		}
		if err != nil {
			return &attrError{name, err}
		}
	}
	return nil
}

// check asks of a communication node what running it needs.
func (n *Node) check() error {
	switch n.Kind {
	case Coll:
		// A CPU-side COMM_COLL (PyTorch's c10d::* host op in traces of
		// schema 1.0.x) is its host time only: it need not say what it is.
		if !n.HasComm && !n.IsCPUOp {
			return &attrError{"attr comm_type", errors.New("missing on a COMM_COLL node (not a CPU op)")}
		}
	case Send:
		if !n.HasDst {
			return &attrError{"attr comm_dst", errors.New("missing on a COMM_SEND node")}
		}
	case Recv:
		if !n.HasSrc {
			return &attrError{"attr comm_src", errors.New("missing on a COMM_RECV node")}
		}
	}
	return nil
}

// intAttr reads an integer attribute from any of protobuf's integer
// types (astra-sim #224: a uint64 comm_size read as another type was 0).
func intAttr(a *etpb.AttributeProto) (int64, error) {
	switch v := a.GetValue().(type) {
	case *etpb.AttributeProto_Int32Val:
		return int64(v.Int32Val), nil
	case *etpb.AttributeProto_Int64Val:
		return v.Int64Val, nil
	case *etpb.AttributeProto_Uint32Val:
		return int64(v.Uint32Val), nil
	case *etpb.AttributeProto_Uint64Val:
		if v.Uint64Val > math.MaxInt64 {
			return 0, fmt.Errorf("uint64 %d is beyond int64", v.Uint64Val)
		}
		return int64(v.Uint64Val), nil
	case *etpb.AttributeProto_Sint32Val:
		return int64(v.Sint32Val), nil
	case *etpb.AttributeProto_Sint64Val:
		return v.Sint64Val, nil
	case *etpb.AttributeProto_Fixed32Val:
		return int64(v.Fixed32Val), nil
	case *etpb.AttributeProto_Fixed64Val:
		if v.Fixed64Val > math.MaxInt64 {
			return 0, fmt.Errorf("fixed64 %d is beyond int64", v.Fixed64Val)
		}
		return int64(v.Fixed64Val), nil
	case *etpb.AttributeProto_Sfixed32Val:
		return int64(v.Sfixed32Val), nil
	case *etpb.AttributeProto_Sfixed64Val:
		return v.Sfixed64Val, nil
	case *etpb.AttributeProto_BoolVal:
		if v.BoolVal {
			return 1, nil
		}
		return 0, nil
	case nil:
		return 0, errors.New("no value")
	default:
		return 0, fmt.Errorf("expected an integer, found %s", valueKind(a))
	}
}

func stringAttr(a *etpb.AttributeProto) (string, error) {
	switch v := a.GetValue().(type) {
	case *etpb.AttributeProto_StringVal:
		return v.StringVal, nil
	case *etpb.AttributeProto_BytesVal:
		return string(v.BytesVal), nil
	case nil:
		return "", nil
	}
	// Some converters write a process group's name as its number.
	i, err := intAttr(a)
	if err != nil {
		return "", fmt.Errorf("expected a string, found %s", valueKind(a))
	}
	return strconv.FormatInt(i, 10), nil
}

func boolList(a *etpb.AttributeProto) ([]bool, error) {
	switch v := a.GetValue().(type) {
	case *etpb.AttributeProto_BoolList:
		return v.BoolList.GetValues(), nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("expected a bool list, found %s", valueKind(a))
}

func valueKind(a *etpb.AttributeProto) string {
	m := a.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("value")); fd != nil {
		return string(fd.Name())
	}
	return "nothing"
}

// Writer writes one rank's ET.
type Writer struct {
	w   *bufio.Writer
	err error
}

// NewWriter writes the GlobalMetadata (version) and returns a writer for
// the nodes; Close flushes.
func NewWriter(w io.Writer, version string) *Writer {
	wr := &Writer{w: bufio.NewWriter(w)}
	wr.put(&etpb.GlobalMetadata{Version: version})
	return wr
}

func (w *Writer) put(m proto.Message) {
	if w.err == nil {
		_, w.err = protodelim.MarshalTo(w.w, m)
	}
}

// Node writes one node.
func (w *Writer) Node(n *etpb.Node) { w.put(n) }

// Close flushes what was written and returns the first error.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// Int, Str and Bool build attributes for a node.
func Int(name string, v int64) *etpb.AttributeProto {
	return &etpb.AttributeProto{Name: name, Value: &etpb.AttributeProto_Int64Val{Int64Val: v}}
}

func Uint(name string, v uint64) *etpb.AttributeProto {
	return &etpb.AttributeProto{Name: name, Value: &etpb.AttributeProto_Uint64Val{Uint64Val: v}}
}

func Str(name, v string) *etpb.AttributeProto {
	return &etpb.AttributeProto{Name: name, Value: &etpb.AttributeProto_StringVal{StringVal: v}}
}

func Bool(name string, v bool) *etpb.AttributeProto {
	return &etpb.AttributeProto{Name: name, Value: &etpb.AttributeProto_BoolVal{BoolVal: v}}
}
