package tests

import (
	"encoding/json"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// phyrun moves every byte between real processes (each checked on
// arrival) and never starts a flow before its dependencies are done: a
// flow sending from a dependency's receiver may start once the data is in,
// others only after the dependency ends.
func TestPhyrun(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "24", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	in := mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "6MiB", "--group", "dp", "--tp", "4", "--channels", "2")
	d := readDAG(t, in)
	for _, launch := range []string{"local:1", "local:3"} {
		rows, meta := readTrace(t, mustRun(t, in, "phyrun", "--launch", launch, "--step", "64KiB"))
		if meta.Backend != "phy" || len(rows) != len(d.flows) {
			t.Fatalf("%s: backend %q, %d rows for %d flows", launch, meta.Backend, len(rows), len(d.flows))
		}
		byID := map[int64]int{}
		var bytes, want int64
		for i, r := range rows {
			byID[r.FlowID] = i
			bytes += r.SizeBytes
		}
		for _, f := range d.flows {
			if f.ConnType != stream.ConnDelay {
				want += f.Size
			}
			r := rows[byID[f.ID]]
			if r.EndNs < r.StartNs {
				t.Fatalf("%s: flow %d ends before it starts", launch, f.ID)
			}
			for _, dep := range f.Deps {
				p := rows[byID[dep]]
				if r.StartNs < p.StartNs {
					t.Fatalf("%s: flow %d started before its dependency %d", launch, f.ID, dep)
				}
				var src, pdst int32 = f.Src, d.flows[dep].Dst
				if src != pdst && r.StartNs < p.EndNs {
					t.Fatalf("%s: flow %d started at %d, before dependency %d ended at %d", launch, f.ID, r.StartNs, dep, p.EndNs)
				}
			}
		}
		if bytes != want {
			t.Fatalf("%s: trace holds %d bytes, input %d", launch, bytes, want)
		}
	}
	oneLineError(t, run(t, in, "phyrun", "--launch", "remote:2"), 2, "local:N")
	oneLineError(t, run(t, []byte("junk"), "phyrun"), 1, "<stdin>: record 0")
}

// A transfer's step latency holds it back in real time too: a chain of six
// 1 KiB transfers between two servers' workers, each with a 2 ms step
// latency, takes at least six steps less the calibrated loopback latency
// (phyrun counts the path's own latency in the step, as the simulators
// count the fabric's; the trace records what it calibrated), and each
// flow's ideal FCT counts its whole step.
func TestPhyrunStepLatency(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "A100")
	in := streamWithFlows(t, topoOut, nil, nil, func(emit func(*stream.Flow)) {
		for k := int64(0); k < 6; k++ {
			f := stream.Flow{ID: k, Collective: -1, Src: 0, Dst: 8, Size: 1024, ConnType: stream.ConnP2P, DelayPs: 2_000_000_000}
			if k%2 == 1 {
				f.Src, f.Dst = 8, 0
			}
			if k > 0 {
				f.Deps = []int64{k - 1}
			}
			emit(&f)
		}
	})
	rows, meta := readTrace(t, mustRun(t, in, "phyrun", "--launch", "local:2"))
	num, _ := meta.Params["calibration_latency_ns"].(json.Number)
	cal, err := num.Int64()
	if err != nil || cal <= 0 || cal >= 2_000_000 {
		t.Fatalf("calibration_latency_ns %v in the trace's params", meta.Params["calibration_latency_ns"])
	}
	step := 2_000_000 - cal
	var first, last int64 = rows[0].StartNs, 0
	for _, r := range rows {
		first, last = min(first, r.StartNs), max(last, r.EndNs)
		if r.IdealFctNs < 2_000_000 || r.FctNs < step {
			t.Errorf("flow %d: fct %d ns, ideal %d ns, for a 2 ms step", r.FlowID, r.FctNs, r.IdealFctNs)
		}
	}
	if last-first < 6*step {
		t.Errorf("six 2 ms steps took %d ns", last-first)
	}
}

// A transfer between two servers crosses a socket even when one worker
// hosts both (--launch local:1): it once became an in-process copy that
// "moved" 64 MiB in 24 µs. A transfer inside one server stays a local
// copy. The two are told apart by their ratio, not by a rate: a machine
// of any speed, loaded or not, copies nothing far faster than it pushes
// 64 MiB through a socket, and a copy on both sides gives a ratio near 1.
func TestPhyrunOneWorkerStillUsesSockets(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16")
	const size = 64 << 20
	in := streamWithFlows(t, topoOut, nil, nil, func(emit func(*stream.Flow)) {
		emit(&stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 8, Size: size, Channel: -1, ConnType: stream.ConnP2P})
		emit(&stream.Flow{ID: 1, Collective: -1, Src: 0, Dst: 1, Size: size, Channel: -1, ConnType: stream.ConnP2P})
	})
	rows, _ := readTrace(t, mustRun(t, in, "phyrun", "--launch", "local:1"))
	fct := map[int64]int64{}
	for _, r := range rows {
		fct[r.FlowID] = r.EndNs - r.StartNs
	}
	// The copy moves nothing: it ends with the control messages' round
	// trip, a small part of the socket transfer however loaded the machine.
	if fct[0] <= 0 || fct[1] > fct[0]/4 {
		t.Errorf("GPU 0 -> GPU 1 (one server): %d ns against %d ns through the socket, want a local copy", fct[1], fct[0])
	}
}
