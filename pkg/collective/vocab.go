// Package collective decomposes a workload into the flow DAG every backend
// simulates: each collective, planned with NCCL's tuning model (pkg/nccl)
// on the groups of the job's rank layout (pkg/workload), becomes chunked
// point-to-point flows with their dependencies: ring, tree, NVLS, PAT,
// all-to-all and MSCCL schedules, NCCL's transport costs per step, and the
// programs of every rank joined into one DAG.
package collective

import (
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// The decomposition speaks NCCL's and the workload's vocabulary on nearly
// every line; these aliases keep its files free of package prefixes. Code
// outside this package names pkg/nccl and pkg/workload directly.
type (
	Op          = nccl.Op
	Algo        = nccl.Algo
	Proto       = nccl.Proto
	Tuner       = nccl.Tuner
	LatTerms    = nccl.LatTerms
	ServerModel = nccl.ServerModel

	Step     = workload.Step
	Workload = workload.Workload
	Layout   = workload.Layout
)

const (
	AllReduce     = nccl.AllReduce
	AllGather     = nccl.AllGather
	ReduceScatter = nccl.ReduceScatter
	AllToAll      = nccl.AllToAll
	Broadcast     = nccl.Broadcast
	Reduce        = nccl.Reduce
	SendRecv      = nccl.SendRecv

	AlgoTree          = nccl.AlgoTree
	AlgoRing          = nccl.AlgoRing
	AlgoCollNetDirect = nccl.AlgoCollNetDirect
	AlgoCollNetChain  = nccl.AlgoCollNetChain
	AlgoNVLS          = nccl.AlgoNVLS
	AlgoNVLSTree      = nccl.AlgoNVLSTree
	AlgoPAT           = nccl.AlgoPAT
	AlgoDirect        = nccl.AlgoDirect
	AlgoPXN           = nccl.AlgoPXN
	AlgoP2P           = nccl.AlgoP2P
	AlgoMSCCL         = nccl.AlgoMSCCL

	LL     = nccl.LL
	LL128  = nccl.LL128
	Simple = nccl.Simple

	TP   = workload.TP
	DP   = workload.DP
	PP   = workload.PP
	EP   = workload.EP
	DPEP = workload.DPEP
)
