// Package backend is the one contract every simulation backend keeps: it
// runs a read-only flow set and reports each finished flow's result
// (flowset.Result, by DAG index, in ps), which flowset.Rows writes as a
// trace row. Analytical, Packet and Phy adapt the three backends to it, so
// that A/B comparisons and seed sweeps run in one process on one set.
package backend

import (
	"github.com/fabricsim/fabricsim/pkg/analytical"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/packet"
	"github.com/fabricsim/fabricsim/pkg/phy"
)

// Backend runs set (never writing it) and calls emit once for each flow
// that finished, in an order of its own; an error of emit ends the run.
// A run that finished only some flows returns an error saying why, after
// reporting those (Packet) or none (Phy).
type Backend interface {
	Run(set *flowset.Set, emit func(i int32, r flowset.Result) error) error
}

// Analytical is flowsim-analytical's backend under its options.
type Analytical struct{ Options analytical.Options }

// Run reports results in completion order.
func (b Analytical) Run(set *flowset.Set, emit func(int32, flowset.Result) error) error {
	_, err := analytical.RunResults(set, b.Options, emit)
	return err
}

// Packet is flowsim-packet's backend under its options.
type Packet struct{ Options packet.Options }

// Run reports results in index order, after the run.
func (b Packet) Run(set *flowset.Set, emit func(int32, flowset.Result) error) error {
	_, err := packet.RunResults(set, b.Options, emit)
	return err
}

// Phy is phyrun's backend (real transfers between worker processes)
// under its options.
type Phy struct{ Options phy.Options }

// Run reports results in index order, after the run.
func (b Phy) Run(set *flowset.Set, emit func(int32, flowset.Result) error) error {
	res, _, err := phy.Run(set, b.Options)
	if err != nil {
		return err
	}
	for i, r := range res {
		if err := emit(int32(i), r); err != nil {
			return err
		}
	}
	return nil
}

var (
	_ Backend = Analytical{}
	_ Backend = Packet{}
	_ Backend = Phy{}
)
