package route

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is how the fabric's switches choose among equal-cost next hops:
// one choice for every backend (flowsim-packet's ROUTING key, the
// analytical backends' --routing), so that two backends given the same
// policy differ only in what they model. Each backend realises it at its
// own level of detail:
//
//   - ecmp (default, as SimAI and ns-3): a flow's bytes follow one path,
//     hashed from the flow (QPHash: the packet backend's first queue pair
//     and the fluid model hash the same values, so with the same seed they
//     take the same paths). At collective granularity, the
//     expected bottleneck over draws of the collective's connections'
//     hashes.
//   - spray: every packet hashed on its own; in the fluid models the flow's
//     bytes are split evenly over the equal-cost paths (Spread), so the
//     most loaded of them paces it.
//   - flowlet: a flow re-picks its hashed path after an idle gap. Fluid
//     flows never idle, so there it is ecmp.
//   - adaptive: switches send each packet to the least loaded eligible
//     egress (Spectrum-X). In the fluid models a flow's bytes are split, hop
//     by hop, evenly over the least loaded next hops when it starts
//     (SpreadLeast); at collective granularity, the even split.
type Policy uint8

// The policies.
const (
	ECMP Policy = iota
	Spray
	Flowlet
	Adaptive
)

// PolicyNames lists the policies by value, as the ROUTING key spells them.
var PolicyNames = [...]string{"ecmp", "spray", "flowlet", "adaptive"}

func (p Policy) String() string {
	if int(p) < len(PolicyNames) {
		return PolicyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", p)
}

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	if i := slices.Index(PolicyNames[:], s); i >= 0 {
		return Policy(i), nil
	}
	return 0, fmt.Errorf("%q: expected %s or %s", s, strings.Join(PolicyNames[:len(PolicyNames)-1], ", "), PolicyNames[len(PolicyNames)-1])
}

// PerPacket reports whether switches choose per packet (all but ecmp).
func (p Policy) PerPacket() bool { return p != ECMP }

// Hashed reports whether a fluid flow keeps one hashed path (ecmp and,
// since fluid flows never idle, flowlet).
func (p Policy) Hashed() bool { return p == ECMP || p == Flowlet }

// HashKey is what an ECMP hash is drawn for: each transfer (the default,
// as SimAI's ns-3 opens a queue pair per flow) or each connection, as NCCL
// keeps one queue pair per channel's connection between two GPUs
// (NCCL_IB_QPS_PER_CONNECTION=1), so that every chunk the connection
// carries takes the path its queue pair hashed to.
type HashKey uint8

// The keys.
const (
	KeyTransfer HashKey = iota
	KeyConnection
)

// HashKeyNames lists the keys by value, as the flags spell them.
var HashKeyNames = [...]string{"transfer", "connection"}

func (k HashKey) String() string {
	if int(k) < len(HashKeyNames) {
		return HashKeyNames[k]
	}
	return fmt.Sprintf("HashKey(%d)", k)
}

// ParseHashKey reads a key name.
func ParseHashKey(s string) (HashKey, error) {
	if i := slices.Index(HashKeyNames[:], s); i >= 0 {
		return HashKey(i), nil
	}
	return 0, fmt.Errorf("%q: expected %s or %s", s, HashKeyNames[0], HashKeyNames[1])
}

// ID is the id QPHash hashes for transfer id on channel ch under key k:
// the transfer's own, or its connection's (src and dst are hashed
// besides). Transfer ids are not negative and connection ids are, so no
// connection takes a transfer's draw. A connection is its ends and
// channel: two communicators' channels between the same GPUs share one.
func (k HashKey) ID(id int64, ch int32) int64 {
	if k == KeyConnection {
		return -2 - int64(ch) // channel -1 (no channel) too stays negative
	}
	return id
}

// QPHash is the ECMP hash of part j (queue pair j) of transfer id from src
// to dst: every backend hashes a transfer's first part with j = 0, so the
// same seed routes it the same way in each.
func QPHash(src, dst int32, id, j int64, seed uint64) uint64 {
	return FlowHash(src, dst, id*64+j, seed)
}
