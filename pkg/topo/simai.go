package topo

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// WriteSimAI writes SimAI's text topology: a header line
// "<nodes> <gpus_per_server> <nvswitches> <other_switches> <links> <gpu_type>",
// the switch ids (each followed by a space), then "a b <bw>Gbps <lat>ms <err>"
// per link. The number formats are those of SimAI's generator, so a file it
// wrote and re-exported here is identical.
func WriteSimAI(w io.Writer, t *Topology) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	nvs, sw := 0, 0
	for i := t.GPUs; i < len(t.Nodes); i++ {
		if t.Nodes[i].Kind == stream.NodeNVSwitch {
			nvs++
		} else {
			sw++
		}
	}
	fmt.Fprintf(bw, "%d %d %d %d %d %s\n", len(t.Nodes), t.GPUsPerServer, nvs, sw, len(t.Links), t.GPUType)
	for i := t.GPUs; i < len(t.Nodes); i++ {
		bw.WriteString(strconv.Itoa(i))
		bw.WriteByte(' ')
	}
	bw.WriteByte('\n')
	var buf []byte
	for i := range t.Links {
		l := &t.Links[i]
		buf = strconv.AppendInt(buf[:0], int64(l.A), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(l.B), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendFloat(buf, l.BWbps/1e9, 'f', -1, 64)
		buf = append(buf, "Gbps "...)
		buf = strconv.AppendFloat(buf, float64(l.LatencyPs)/1e9, 'f', -1, 64)
		buf = append(buf, "ms "...)
		buf = strconv.AppendFloat(buf, l.ErrorRate, 'f', -1, 64)
		buf = append(buf, '\n')
		bw.Write(buf)
	}
	return bw.Flush()
}

// LineError names the file, line and field of a bad SimAI topology line.
type LineError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *LineError) Error() string {
	s := fmt.Sprintf("%s: line %d", e.File, e.Line)
	if e.Field != "" {
		s += ", field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

// ReadSimAI parses SimAI's text topology. GPUs are the first
// nodes-nvswitches-switches ids; the first <nvswitches> ids of line 2 are
// NVSwitches. Link kinds follow from the ends (GPU-NVSwitch nvlink,
// GPU-switch nic, switch-switch fabric) and switch roles from their distance
// to the GPUs (asw, psw, dsw).
func ReadSimAI(r io.Reader, name string) (*Topology, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	line := 0
	bad := func(field string, format string, args ...any) error {
		return &LineError{File: name, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
	}
	next := func() ([]string, bool) {
		for sc.Scan() {
			line++
			if f := strings.Fields(sc.Text()); len(f) > 0 {
				return f, true
			}
		}
		return nil, false
	}
	f, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, &LineError{File: name, Line: line + 1, Err: err}
		}
		return nil, &LineError{File: name, Line: 1, Err: fmt.Errorf("empty file, expected \"<nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>\"")}
	}
	if len(f) != 6 && len(f) != 5 {
		return nil, bad("", "header has %d fields, expected 6: <nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>", len(f))
	}
	names := []string{"nodes", "gpus_per_server", "nvswitches", "switches", "links"}
	var v [5]int
	for i := range names {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 {
			return nil, bad(names[i], "%q is not a non-negative integer", f[i])
		}
		v[i] = n
	}
	nodes, gps, nvs, sws, nlinks := v[0], v[1], v[2], v[3], v[4]
	gpuType := "H100" // SimAI's default when the file predates the gpu_type column
	if len(f) == 6 {
		gpuType = f[5]
		if _, ok := GPUSpecs[gpuType]; !ok {
			return nil, bad("gpu_type", "unknown GPU type %q", gpuType)
		}
	}
	gpus := nodes - nvs - sws
	switch {
	case nodes > 1<<24:
		return nil, bad("nodes", "%d nodes is beyond what fabricsim handles (16M)", nodes)
	case gpus <= 0:
		return nil, bad("nodes", "%d nodes leave no GPUs after %d NVSwitches and %d switches", nodes, nvs, sws)
	case gps == 0 || gpus%gps != 0:
		return nil, bad("gpus_per_server", "%d does not divide the %d GPUs", gps, gpus)
	case nvs%(gpus/gps) != 0:
		return nil, bad("nvswitches", "%d NVSwitches do not split evenly over %d servers", nvs, gpus/gps)
	}
	t := &Topology{Family: "simai", GPUs: gpus, GPUsPerServer: gps, NVSwitchesPerServer: nvs / (gpus / gps), GPUType: gpuType,
		Params: map[string]string{"source": name}}
	t.Nodes = make([]stream.Node, nodes)
	for i := range t.Nodes {
		t.Nodes[i] = stream.Node{ID: int32(i), Kind: stream.NodeGPU, Role: RoleGPU, Server: int32(i / gps), Group: -1, Plane: -1}
	}
	if nvs+sws > 0 {
		f, ok = next()
		if !ok {
			return nil, bad("", "missing the line of switch ids")
		}
		if len(f) != nvs+sws {
			return nil, bad("switch ids", "%d ids, the header announces %d NVSwitches + %d switches", len(f), nvs, sws)
		}
		for i, s := range f {
			id, err := strconv.Atoi(s)
			if err != nil || id != gpus+i {
				return nil, bad(fmt.Sprintf("switch ids[%d]", i), "%q: expected %d (switch ids follow the GPUs in order)", s, gpus+i)
			}
			n := &t.Nodes[id]
			n.Server = -1
			if i < nvs {
				n.Kind, n.Role, n.Tier = stream.NodeNVSwitch, RoleNVSwitch, 1
				n.Server = int32(i / t.NVSwitchesPerServer)
			} else {
				n.Kind, n.Role, n.Tier = stream.NodeSwitch, "switch", 2
			}
		}
	}
	t.Links = make([]stream.Link, 0, min(nlinks, 1<<20))
	for {
		f, ok := next()
		if !ok {
			break
		}
		if len(t.Links) == nlinks {
			return nil, bad("", "more links than the %d the header announces", nlinks)
		}
		if len(f) != 5 {
			return nil, bad("", "link has %d fields, expected 5: <src> <dst> <bandwidth> <latency> <error_rate>", len(f))
		}
		var ends [2]int32
		for k, fld := range []string{"src", "dst"} {
			id, err := strconv.Atoi(f[k])
			if err != nil || id < 0 || id >= nodes {
				return nil, bad(fld, "%q is not a node id in 0..%d", f[k], nodes-1)
			}
			ends[k] = int32(id)
		}
		if ends[0] == ends[1] {
			return nil, bad("dst", "link from node %d to itself", ends[0])
		}
		bwv, err := units.ParseBandwidth(f[2])
		if err == nil {
			err = CheckLinkBW(bwv)
		}
		if err != nil {
			return nil, bad("bandwidth", "%v", err)
		}
		lat, err := units.ParseDuration(f[3])
		if err == nil {
			err = CheckLinkLatency(lat)
		}
		if err != nil {
			return nil, bad("latency", "%v", err)
		}
		er, err := strconv.ParseFloat(f[4], 64)
		if err != nil || !(er >= 0 && er <= 1) {
			return nil, bad("error_rate", "%q is not a probability", f[4])
		}
		kind := stream.LinkFabric
		ka, kb := t.Nodes[ends[0]].Kind, t.Nodes[ends[1]].Kind
		switch {
		case ka == stream.NodeGPU && kb == stream.NodeGPU,
			ka == stream.NodeGPU && kb == stream.NodeNVSwitch, ka == stream.NodeNVSwitch && kb == stream.NodeGPU:
			kind = stream.LinkNVLink
		case ka == stream.NodeGPU || kb == stream.NodeGPU:
			kind = stream.LinkNIC
		}
		t.Links = append(t.Links, stream.Link{A: ends[0], B: ends[1], BWbps: bwv, LatencyPs: lat, ErrorRate: er, Kind: kind})
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{File: name, Line: line + 1, Err: err}
	}
	if len(t.Links) != nlinks {
		return nil, &LineError{File: name, Line: line, Field: "links", Err: fmt.Errorf("the header announces %d links, the file has %d", nlinks, len(t.Links))}
	}
	assignTiers(t)
	if err := Validate(t); err != nil {
		return nil, &LineError{File: name, Line: 1, Err: err}
	}
	return t, nil
}

// assignTiers names imported switches by their hop distance from the GPUs
// over switch links: ASW next to GPUs, then PSW, then DSW.
func assignTiers(t *Topology) {
	adj := BuildAdjacency(t)
	dist := make([]int, len(t.Nodes))
	for i := range dist {
		dist[i] = -1
	}
	var q []int32
	for i := t.GPUs; i < len(t.Nodes); i++ {
		if t.Nodes[i].Kind != stream.NodeSwitch {
			continue
		}
		for _, li := range adj.Links[adj.Start[i]:adj.Start[i+1]] {
			if int(Other(t, li, int32(i))) < t.GPUs {
				dist[i] = 0
				q = append(q, int32(i))
				break
			}
		}
	}
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
			o := Other(t, li, v)
			if t.Nodes[o].Kind == stream.NodeSwitch && dist[o] < 0 {
				dist[o] = dist[v] + 1
				q = append(q, o)
			}
		}
	}
	roles := []string{RoleASW, RolePSW, RoleDSW}
	for i := t.GPUs; i < len(t.Nodes); i++ {
		n := &t.Nodes[i]
		if n.Kind != stream.NodeSwitch {
			continue
		}
		d := dist[i]
		if d < 0 || d >= len(roles) {
			d = len(roles) - 1
		}
		n.Role, n.Tier = roles[d], roleTier[roles[d]]
	}
}
