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
