// Package topo models the fabric (GPUs, NVSwitches, network switches and
// links), generates SimAI's five datacenter families plus fat-tree and
// dragonfly, imports and exports SimAI's text topology, and analyses a
// fabric (reachability, oversubscription, bisection bandwidth, diameter).
package topo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Topology is the stream's topology record; the model works on it directly.
type Topology = stream.Topology

// Roles of network switches.
const (
	RoleGPU      = "gpu"
	RoleNVSwitch = "nvswitch"
	RoleASW      = "asw"    // leaf / ToR (SimAI "ASW")
	RolePSW      = "psw"    // spine (SimAI "PSW")
	RoleDSW      = "dsw"    // third tier above PSW, for imported files
	RoleEdge     = "edge"   // fat-tree
	RoleAgg      = "agg"    // fat-tree
	RoleCore     = "core"   // fat-tree
	RoleRouter   = "router" // dragonfly
)

// Tier of each role: 0 GPU, 1 NVSwitch, 2.. network tiers from the edge up.
var roleTier = map[string]int8{
	RoleGPU: 0, RoleNVSwitch: 1, RoleASW: 2, RoleEdge: 2, RoleRouter: 2,
	RolePSW: 3, RoleAgg: 3, RoleDSW: 4, RoleCore: 4,
}

// RoleTier returns the tier of a node role (0 GPU, 1 NVSwitch, 2.. network
// tiers from the edge up) and whether topo knows the role.
func RoleTier(role string) (int, bool) {
	t, ok := roleTier[role]
	return int(t), ok
}

// Validate checks the invariants every program relies on: dense ids with
// GPUs first, known kinds, links between existing nodes with positive
// bandwidth. Errors name the node or link index.
func Validate(t *Topology) error {
	if t.GPUs <= 0 {
		return fmt.Errorf("gpus: %d, need at least one GPU", t.GPUs)
	}
	if t.GPUsPerServer <= 0 || t.GPUs%t.GPUsPerServer != 0 {
		return fmt.Errorf("gpus_per_server: %d does not divide %d GPUs", t.GPUsPerServer, t.GPUs)
	}
	if len(t.Nodes) < t.GPUs {
		return fmt.Errorf("nodes: %d nodes but %d GPUs", len(t.Nodes), t.GPUs)
	}
	if _, ok := GPUSpecs[t.GPUType]; !ok {
		// Every model takes the GPU's rates and NCCL's tuning from it.
		return fmt.Errorf("gpu_type: unknown GPU type %q (one of %s)", t.GPUType, strings.Join(GPUTypeNames(), ", "))
	}
	if _, err := NICNetwork(t); err != nil {
		return err // it chooses the transport's calibrated costs
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if int(n.ID) != i {
			return fmt.Errorf("nodes[%d]: id %d, ids must be dense and in order", i, n.ID)
		}
		isGPU := i < t.GPUs
		switch {
		case isGPU && n.Kind != stream.NodeGPU:
			return fmt.Errorf("nodes[%d]: kind %q, the first %d nodes must be GPUs", i, n.Kind, t.GPUs)
		case !isGPU && n.Kind == stream.NodeGPU:
			return fmt.Errorf("nodes[%d]: GPU after the first %d nodes", i, t.GPUs)
		case !isGPU && n.Kind != stream.NodeNVSwitch && n.Kind != stream.NodeSwitch:
			return fmt.Errorf("nodes[%d]: unknown kind %q", i, n.Kind)
		}
	}
	for i := range t.Links {
		l := &t.Links[i]
		switch {
		case l.A < 0 || int(l.A) >= len(t.Nodes) || l.B < 0 || int(l.B) >= len(t.Nodes):
			return fmt.Errorf("links[%d]: %d-%d names a node outside 0..%d", i, l.A, l.B, len(t.Nodes)-1)
		case l.A == l.B:
			return fmt.Errorf("links[%d]: loop on node %d", i, l.A)
		case !(l.BWbps > 0) || math.IsInf(l.BWbps, 0):
			return fmt.Errorf("links[%d]: bandwidth %g bit/s, must be positive", i, l.BWbps)
		case l.LatencyPs < 0:
			return fmt.Errorf("links[%d]: negative latency %d ps", i, l.LatencyPs)
		case !(l.ErrorRate >= 0 && l.ErrorRate < 1):
			// 1 loses every packet: a transfer over it never completes.
			return fmt.Errorf("links[%d]: error rate %g outside [0,1)", i, l.ErrorRate)
		}
		switch l.Kind {
		case stream.LinkNVLink, stream.LinkPCIe, stream.LinkNIC, stream.LinkFabric:
		default:
			return fmt.Errorf("links[%d]: unknown kind %q", i, l.Kind)
		}
	}
	return nil
}

// Hash fingerprints the fabric (nodes' kinds and links with their
// parameters), so traces can say which topology produced them.
func Hash(t *Topology) string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	put(uint64(t.GPUs))
	put(uint64(t.GPUsPerServer))
	for i := range t.Nodes {
		h.Write([]byte(t.Nodes[i].Kind))
		h.Write([]byte(t.Nodes[i].Role))
	}
	for i := range t.Links {
		l := &t.Links[i]
		put(uint64(l.A)<<32 | uint64(uint32(l.B)))
		put(math.Float64bits(l.BWbps))
		put(uint64(l.LatencyPs))
		put(math.Float64bits(l.ErrorRate))
		h.Write([]byte(l.Kind))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Adjacency is a compressed neighbour list: the links of node v are
// Links[Start[v]:Start[v+1]], each an index into Topology.Links.
type Adjacency struct {
	Start []int32
	Links []int32
}

// BuildAdjacency indexes the links of each node.
func BuildAdjacency(t *Topology) *Adjacency {
	n := len(t.Nodes)
	a := &Adjacency{Start: make([]int32, n+1), Links: make([]int32, 2*len(t.Links))}
	for _, l := range t.Links {
		a.Start[l.A+1]++
		a.Start[l.B+1]++
	}
	for v := 0; v < n; v++ {
		a.Start[v+1] += a.Start[v]
	}
	fill := append([]int32(nil), a.Start[:n]...)
	for i, l := range t.Links {
		a.Links[fill[l.A]] = int32(i)
		fill[l.A]++
		a.Links[fill[l.B]] = int32(i)
		fill[l.B]++
	}
	return a
}

// Other returns the far end of link li seen from node v.
func Other(t *Topology, li int32, v int32) int32 {
	if l := &t.Links[li]; l.A == v {
		return l.B
	} else {
		return l.A
	}
}
