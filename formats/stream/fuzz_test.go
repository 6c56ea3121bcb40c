package stream

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// FuzzReader: arbitrary bytes either read cleanly or fail with a located
// *Error; never a panic.
func FuzzReader(f *testing.F) {
	f.Add(writeSample(f))
	f.Add([]byte{})
	f.Add([]byte{0x92, 0xa6, 'h', 'e', 'a', 'd', 'e', 'r', 0x80})
	{
		var buf bytes.Buffer
		w, err := NewWriter(&buf, "fuzz seed")
		must(f, err)
		must(f, w.Note(&Note{Producer: "simccl-decompose", Text: "3 dependencies dropped"}))
		must(f, w.Close())
		f.Add(buf.Bytes())
	}
	// Topologies that once went through unchecked: a negative or huge GPU
	// count, bandwidths NaN, zero or 1 bit/s, a latency of 2^62 ps, a link
	// to a missing node, an error rate of 1.
	for _, mutate := range []func(*Topology){
		func(t *Topology) { t.GPUs = -1 },
		func(t *Topology) { t.GPUs = 1e9 },
		func(t *Topology) { t.Links[0].BWbps = math.NaN() },
		func(t *Topology) { t.Links[1].BWbps = 0 },
		func(t *Topology) { t.Links[2].BWbps = 1 },
		func(t *Topology) { t.Links[3].LatencyPs = 1 << 62 },
		func(t *Topology) { t.Links[1].B = 9999 },
		func(t *Topology) { t.Links[0].ErrorRate = 1 },
	} {
		tp := sampleTopology()
		mutate(tp)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, "fuzz seed")
		must(f, err)
		must(f, w.Topology(tp))
		must(f, w.Close())
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := readAll(data); err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("unlocated error %T: %v", err, err)
			}
		}
	})
}

// The fast and the strict decoders agree on every input: same records,
// same values, and an error from one is an error from the other.
func FuzzFastPathAgrees(f *testing.F) {
	f.Add(writeSample(f))
	f.Add(rec2(f, []any{"flow", []any{1, -2, 3, 4, 1 << 40, []int{1, 2, 300000}, -1, 7, 9, "TREE", 12345678901}}))
	f.Add(manyDeps(20, false))
	f.Add(manyDeps(3, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, errA := decodeAll(data, false)
		b, errB := decodeAll(data, true)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("fast error %v, strict error %v", errA, errB)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("fast %+v\nstrict %+v", a, b)
		}
	})
}

func rec2(f *testing.F, values ...any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.Encode(hdr)
	for _, v := range values {
		enc.Encode(v)
	}
	enc.Encode([]any{"trailer", map[string]any{"counts": map[string]int{"flow": 1}}})
	return buf.Bytes()
}

func decodeAll(data []byte, strict bool) ([]Flow, error) {
	r, err := NewReader(bytes.NewReader(data), "in")
	if err != nil {
		return nil, err
	}
	r.noFast = strict
	var out []Flow
	for {
		kind, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if kind == KindFlow {
			var f Flow
			if err := r.Flow(&f); err != nil {
				return nil, err
			}
			if len(f.Deps) == 0 {
				f.Deps = nil
			}
			out = append(out, f)
		}
	}
}

// manyDeps is a flow record whose deps array has n entries (a join's),
// its header written as array32 when wide, which no writer here uses.
func manyDeps(n int, wide bool) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.Encode(hdr)
	buf.Write([]byte{0x92, 0xa4, 'f', 'l', 'o', 'w', 0x9b})
	for _, v := range []int64{int64(n), 0, 1, 2, 0} {
		enc.EncodeInt(v)
	}
	if wide {
		buf.Write([]byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	} else {
		enc.EncodeArrayLen(n)
	}
	for i := 0; i < n; i++ {
		enc.EncodeInt(int64(i * 1000)) // 3 bytes and more each
	}
	for _, v := range []int64{-1, 0, 1} {
		enc.EncodeInt(v)
	}
	enc.EncodeString("DELAY")
	enc.EncodeInt(0)
	enc.Encode([]any{"trailer", map[string]any{"counts": map[string]int{"flow": 1}}})
	return buf.Bytes()
}

// A join's long deps list is read by the fast path (array16 and array32
// headers, longer than the 512 bytes first peeked), as the strict one reads
// it; one longer than the reader's buffer (256 KiB) is left to the strict one.
func TestFastFlowManyDeps(t *testing.T) {
	for _, c := range []struct {
		n          int
		wide, fast bool
	}{{16, false, true}, {4094, false, true}, {3, true, true}, {5000, true, true}, {70000, false, false}} {
		data := manyDeps(c.n, c.wide)
		r, err := NewReader(bytes.NewReader(data), "in")
		must(t, err)
		if kind, err := r.Next(); err != nil || kind != KindFlow {
			t.Fatalf("%d deps: %q %v", c.n, kind, err)
		}
		must(t, r.body(KindFlow))
		var f Flow
		if r.fastFlow(&f) != c.fast {
			t.Fatalf("%d deps (array32 %v): fast path took it %v, want %v", c.n, c.wide, !c.fast, c.fast)
		}
		fast, err := decodeAll(data, false)
		must(t, err)
		strict, err := decodeAll(data, true)
		must(t, err)
		if len(strict) != 1 || !reflect.DeepEqual(strict, fast) || len(strict[0].Deps) != c.n || strict[0].Deps[c.n-1] != int64(c.n-1)*1000 {
			t.Fatalf("%d deps: fast %+v, strict %+v", c.n, len(fast), len(strict))
		}
		if c.fast && !reflect.DeepEqual(strict[0], f) {
			t.Fatalf("%d deps: fastFlow read %d deps", c.n, len(f.Deps))
		}
	}
}

// fastInt reads every msgpack integer encoding, at its boundaries and in
// every width, as msgpack does; a truncated one or a uint64 above int64 is
// left to the strict path.
func TestFastIntEncodings(t *testing.T) {
	vals := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, v := range vals {
		var encs [][]byte
		enc := func(f func(e *msgpack.Encoder) error) {
			var buf bytes.Buffer
			if err := f(msgpack.NewEncoder(&buf)); err != nil {
				t.Fatal(err)
			}
			encs = append(encs, buf.Bytes())
		}
		enc(func(e *msgpack.Encoder) error { return e.EncodeInt(v) })
		enc(func(e *msgpack.Encoder) error { return e.EncodeInt64(v) })
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt8(int8(v)) })
		}
		if v >= math.MinInt16 && v <= math.MaxInt16 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt16(int16(v)) })
		}
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt32(int32(v)) })
		}
		if v >= 0 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint64(uint64(v)) })
			if v <= math.MaxUint8 {
				enc(func(e *msgpack.Encoder) error { return e.EncodeUint8(uint8(v)) })
			}
			if v <= math.MaxUint16 {
				enc(func(e *msgpack.Encoder) error { return e.EncodeUint16(uint16(v)) })
			}
			if v <= math.MaxUint32 {
				enc(func(e *msgpack.Encoder) error { return e.EncodeUint32(uint32(v)) })
			}
		}
		for _, b := range encs {
			got, p, ok := fastInt(b, 0)
			if !ok || got != v || p != len(b) {
				t.Errorf("% x: fastInt %d (%d bytes, %v), want %d (%d bytes)", b, got, p, ok, v, len(b))
			}
			if _, _, ok := fastInt(b[:len(b)-1], 0); ok {
				t.Errorf("% x truncated: read", b)
			}
		}
	}
	if _, _, ok := fastInt([]byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, 0); ok {
		t.Error("uint64 2^63 read as an int64")
	}
}
