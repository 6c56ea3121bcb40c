// Package fuzzflows turns fuzz bytes into a flow set for the backends' fuzz
// targets, so that each backend is fed the same kinds of bad input: ends
// that are not GPUs, missing and cyclic dependencies, delays and link
// latencies near the end of time. Only tests import it.
package fuzzflows

import (
	"bytes"
	"errors"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Options shape what the bytes can ask for.
type Options struct {
	Sizes    []int64 // transfer sizes to pick from
	MaxFlows int     // at most this many flows; deps may name ids up to an eighth beyond
	// DelayNodesOnly turns a flow that is given a delay into a delay node
	// (size 0); otherwise a transfer may carry a delay too.
	DelayNodesOnly bool
}

// Set decodes data: byte 0 picks one of tops, bit 0 of byte 1 stretches
// every NIC link's latency to 2^62 ps, then each 6 bytes make one flow. The
// flows go through the stream writer and flowset.Read, whose error (bad
// input the backends never see) is returned as is.
func Set(tops []*topo.Topology, data []byte, o Options) (*flowset.Set, error) {
	if len(data) < 2 || len(tops) == 0 {
		return nil, errShort
	}
	tp := *tops[int(data[0])%len(tops)]
	if data[1]&1 != 0 {
		tp.Links = append([]stream.Link(nil), tp.Links...)
		for i := range tp.Links {
			if tp.Links[i].Kind == stream.LinkNIC {
				tp.Links[i].LatencyPs = 1 << 62
			}
		}
	}
	data = data[2:]
	missing := int64(o.MaxFlows + o.MaxFlows/8)
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "fuzz")
	if err != nil {
		return nil, err
	}
	if err := w.Topology(&tp); err != nil {
		return nil, err
	}
	for id := int64(0); len(data) >= 6 && id < int64(o.MaxFlows); id++ {
		b := data[:6]
		data = data[6:]
		fl := stream.Flow{ID: id, Src: int32(b[0]) - 1, Dst: int32(b[1]) - 1, Size: o.Sizes[int(b[2])%len(o.Sizes)], ConnType: stream.ConnRing}
		switch b[3] % 8 {
		case 0:
			fl.Deps = []int64{int64(b[4]) % missing}
		case 1:
			fl.Deps = []int64{int64(b[4]) % (id + 1), int64(b[5]) % (id + 1)}
		case 2:
			fl.Size, fl.ConnType = 0, stream.ConnDelay
		case 3: // a whole collective at collective granularity, on its source
			fl.Dst, fl.ConnType, fl.Channel = fl.Src, stream.ConnColl, -1
		}
		switch b[5] % 5 {
		case 1:
			fl.DelayPs = int64(b[4]) * 1000
		case 2:
			fl.DelayPs = 1 << 62
		}
		if fl.DelayPs != 0 && o.DelayNodesOnly {
			fl.Size = 0
		}
		if err := w.Flow(&fl); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	r, err := stream.NewReader(&buf, "fuzz")
	if err != nil {
		return nil, err
	}
	return flowset.Read(r)
}

var errShort = errors.New("fuzz input shorter than two bytes")
