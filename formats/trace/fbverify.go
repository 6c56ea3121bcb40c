package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file checks Arrow IPC metadata (flatbuffers) before arrow-go reads
// it. arrow-go trusts flatbuffer vector lengths and allocates from them
// (a garbage schema can ask for a 60 GB slice), and an allocation that big
// kills the process with "out of memory", which no recover can catch. The
// checks cover exactly the tables arrow-go walks: every offset, vtable,
// string and vector must lie inside the buffer, so every length arrow-go
// later reads is bounded by the input size. Field ids follow Arrow's
// Message.fbs, Schema.fbs and File.fbs.

var (
	errCorruptMeta  = errors.New("corrupt Arrow IPC metadata")
	errCompressedIO = errors.New("compressed Arrow IPC buffers are not supported (write the trace uncompressed; use Parquet for a compressed trace)")
)

// Flatbuffer union tags of Arrow's MessageHeader and Type.
const (
	hdrSchema          = 1
	hdrDictionaryBatch = 2
	hdrRecordBatch     = 3

	typeTimestamp = 10
	typeUnion     = 14

	maxFieldDepth = 64 // arrow-go's own nesting limit
)

type fbVerifier struct {
	buf    []byte
	budget int // tables and vector elements still allowed: bounds the work on a buffer whose offsets overlap
}

func newFBVerifier(buf []byte) *fbVerifier {
	return &fbVerifier{buf: buf, budget: 1<<16 + 4*len(buf)}
}

func (v *fbVerifier) spend(n int) error {
	v.budget -= n
	if v.budget < 0 {
		return errCorruptMeta
	}
	return nil
}

func (v *fbVerifier) u16(pos int) int { return int(binary.LittleEndian.Uint16(v.buf[pos:])) }
func (v *fbVerifier) u32(pos int) int64 {
	return int64(binary.LittleEndian.Uint32(v.buf[pos:]))
}

// fbTable is a table whose vtable lies inside the buffer.
type fbTable struct {
	v             *fbVerifier
	pos, vt       int
	vtLen, objLen int
}

func (v *fbVerifier) table(pos int) (fbTable, error) {
	if err := v.spend(1); err != nil {
		return fbTable{}, err
	}
	if pos < 0 || pos+4 > len(v.buf) {
		return fbTable{}, errCorruptMeta
	}
	vt := int64(pos) - int64(int32(binary.LittleEndian.Uint32(v.buf[pos:])))
	if vt < 0 || vt+4 > int64(len(v.buf)) {
		return fbTable{}, errCorruptMeta
	}
	t := fbTable{v: v, pos: pos, vt: int(vt)}
	t.vtLen, t.objLen = v.u16(t.vt), v.u16(t.vt+2)
	if t.vtLen < 4 || t.vt+t.vtLen > len(v.buf) || t.objLen < 4 || pos+t.objLen > len(v.buf) {
		return fbTable{}, errCorruptMeta
	}
	return t, nil
}

// field returns the absolute position of field id holding size bytes, or
// 0 if the field is absent.
func (t fbTable) field(id, size int) (int, error) {
	o := 4 + 2*id
	if o >= t.vtLen { // flatbuffers' own test: an odd vtable length still covers the next field
		return 0, nil
	}
	if t.vt+o+2 > len(t.v.buf) {
		return 0, errCorruptMeta
	}
	off := t.v.u16(t.vt + o)
	if off == 0 {
		return 0, nil
	}
	if off < 4 || off+size > t.objLen {
		return 0, errCorruptMeta
	}
	return t.pos + off, nil
}

// ref follows the offset in field id; 0 if absent.
func (t fbTable) ref(id int) (int, error) {
	p, err := t.field(id, 4)
	if p == 0 || err != nil {
		return 0, err
	}
	target := int64(p) + t.v.u32(p)
	if target >= int64(len(t.v.buf)) {
		return 0, errCorruptMeta
	}
	return int(target), nil
}

// scalars checks that fields holding fixed-size values fit in the table.
func (t fbTable) scalars(sizes ...int) error {
	for id, size := range sizes {
		if _, err := t.field(id, size); err != nil {
			return err
		}
	}
	return nil
}

// vector checks the vector in field id, elements of elem bytes, and
// returns its element positions' base and length.
func (t fbTable) vector(id, elem int) (base, n int, err error) {
	p, err := t.ref(id)
	if p == 0 || err != nil {
		return 0, 0, err
	}
	v := t.v
	if p+4 > len(v.buf) {
		return 0, 0, errCorruptMeta
	}
	n64 := v.u32(p)
	if int64(p)+4+n64*int64(elem) > int64(len(v.buf)) {
		return 0, 0, errCorruptMeta
	}
	if err := v.spend(int(n64)); err != nil {
		return 0, 0, err
	}
	return p + 4, int(n64), nil
}

// tables checks a vector of tables in field id with check.
func (t fbTable) tables(id int, check func(pos int) error) error {
	base, n, err := t.vector(id, 4)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		p := base + 4*i
		if err := check(int(int64(p) + t.v.u32(p))); err != nil {
			return err
		}
	}
	return nil
}

func (t fbTable) str(id int) error {
	_, _, err := t.vector(id, 1)
	return err
}

// sub checks the table in field id with check, if present.
func (t fbTable) sub(id int, check func(pos int) error) error {
	p, err := t.ref(id)
	if p == 0 || err != nil {
		return err
	}
	return check(p)
}

func (v *fbVerifier) root() (int, error) {
	if len(v.buf) < 8 {
		return 0, errCorruptMeta
	}
	return int(v.u32(0)), nil
}

// verifyMessage checks an IPC message's metadata and returns its header
// type and body length.
func verifyMessage(buf []byte) (hdr int, bodyLen int64, err error) {
	v := newFBVerifier(buf)
	root, err := v.root()
	if err != nil {
		return 0, 0, err
	}
	t, err := v.table(root)
	if err != nil {
		return 0, 0, err
	}
	if err := t.scalars(2, 1, 4, 8); err != nil {
		return 0, 0, err
	}
	if p, _ := t.field(1, 1); p != 0 {
		hdr = int(buf[p])
	}
	if p, _ := t.field(3, 8); p != 0 {
		bodyLen = int64(binary.LittleEndian.Uint64(buf[p:]))
	}
	if err := t.tables(4, v.keyValue); err != nil {
		return 0, 0, err
	}
	switch hdr {
	case hdrSchema:
		err = t.sub(2, v.schema)
	case hdrRecordBatch:
		err = t.sub(2, v.recordBatch)
	case hdrDictionaryBatch:
		err = t.sub(2, v.dictionaryBatch)
	default:
		return 0, 0, fmt.Errorf("unsupported Arrow IPC message type %d", hdr)
	}
	if err != nil {
		return 0, 0, err
	}
	if bodyLen < 0 {
		return 0, 0, errCorruptMeta
	}
	return hdr, bodyLen, nil
}

// fileBlock is one entry of an Arrow file footer.
type fileBlock struct {
	offset  int64
	metaLen int32
	bodyLen int64
}

// verifyFooter checks an Arrow file footer and returns its blocks,
// dictionaries first.
func verifyFooter(buf []byte) ([]fileBlock, error) {
	v := newFBVerifier(buf)
	root, err := v.root()
	if err != nil {
		return nil, err
	}
	t, err := v.table(root)
	if err != nil {
		return nil, err
	}
	if err := t.scalars(2); err != nil {
		return nil, err
	}
	if err := t.sub(1, v.schema); err != nil {
		return nil, err
	}
	if err := t.tables(4, v.keyValue); err != nil {
		return nil, err
	}
	var blocks []fileBlock
	for _, id := range []int{2, 3} {
		base, n, err := t.vector(id, 24)
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			p := base + 24*i
			blocks = append(blocks, fileBlock{
				offset:  int64(binary.LittleEndian.Uint64(buf[p:])),
				metaLen: int32(binary.LittleEndian.Uint32(buf[p+8:])),
				bodyLen: int64(binary.LittleEndian.Uint64(buf[p+16:])),
			})
		}
	}
	return blocks, nil
}

func (v *fbVerifier) keyValue(pos int) error {
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := t.str(0); err != nil {
		return err
	}
	return t.str(1)
}

func (v *fbVerifier) schema(pos int) error {
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := t.scalars(2); err != nil {
		return err
	}
	if err := t.tables(1, func(p int) error { return v.field(p, 0) }); err != nil {
		return err
	}
	if err := t.tables(2, v.keyValue); err != nil {
		return err
	}
	_, _, err = t.vector(3, 8)
	return err
}

func (v *fbVerifier) field(pos, depth int) error {
	if depth > maxFieldDepth {
		return errors.New("schema of the Arrow data nested too deeply")
	}
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := t.str(0); err != nil {
		return err
	}
	if err := t.scalars(0, 1, 1); err != nil {
		return err
	}
	typ := 0
	if p, _ := t.field(2, 1); p != 0 {
		typ = int(v.buf[p])
	}
	err = t.sub(3, func(p int) error {
		tt, err := v.table(p)
		if err != nil {
			return err
		}
		switch typ {
		case typeTimestamp:
			if err := tt.scalars(2); err != nil {
				return err
			}
			return tt.str(1)
		case typeUnion:
			if err := tt.scalars(2); err != nil {
				return err
			}
			_, _, err := tt.vector(1, 4)
			return err
		}
		// Every other type table holds only scalars; arrow-go reading one
		// past the buffer panics (recovered), it cannot over-allocate.
		return tt.scalars(1, 1, 1)
	})
	if err != nil {
		return err
	}
	err = t.sub(4, func(p int) error { // DictionaryEncoding
		dt, err := v.table(p)
		if err != nil {
			return err
		}
		if err := dt.scalars(8, 0, 1, 2); err != nil {
			return err
		}
		return dt.sub(1, func(p int) error { // Int
			it, err := v.table(p)
			if err != nil {
				return err
			}
			return it.scalars(4, 1)
		})
	})
	if err != nil {
		return err
	}
	if err := t.tables(5, func(p int) error { return v.field(p, depth+1) }); err != nil {
		return err
	}
	return t.tables(6, v.keyValue)
}

func (v *fbVerifier) recordBatch(pos int) error {
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := t.scalars(8); err != nil {
		return err
	}
	if p, err := t.ref(3); err != nil {
		return err
	} else if p != 0 {
		// arrow-go allocates each decompressed buffer at the size its first
		// eight bytes claim, before checking them.
		return errCompressedIO
	}
	for _, vec := range []struct{ id, elem int }{{1, 16}, {2, 16}, {4, 8}} {
		if _, _, err := t.vector(vec.id, vec.elem); err != nil {
			return err
		}
	}
	return nil
}

func (v *fbVerifier) dictionaryBatch(pos int) error {
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := t.scalars(8, 0, 1); err != nil {
		return err
	}
	p, err := t.ref(1)
	if err != nil {
		return err
	}
	if p == 0 {
		return errCorruptMeta
	}
	return v.recordBatch(p)
}
