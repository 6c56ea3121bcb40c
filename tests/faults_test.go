package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// faultTree is a non-blocking k=4 fat-tree of 16 GPUs, one per server:
// GPUs 0-15, edges 16-23 (GPUs 2e and 2e+1 under edge 16+e), aggregation
// 24-31 (edge 16 goes up to 24 and 25), cores 32-35; every link 400 Gbps.
func faultTree(t *testing.T) []byte {
	return mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "16", "--gpus-per-server", "1", "--fat-tree-k", "4")
}

// htsimFlows is a stream of the given "a->b size" transfers, all at 0.
func htsimFlows(t *testing.T, tp []byte, flows ...string) []byte {
	t.Helper()
	cm := fmt.Sprintf("Nodes 16\nConnections %d\n", len(flows))
	for i, f := range flows {
		var a, b, size int
		if _, err := fmt.Sscanf(f, "%d->%d %d", &a, &b, &size); err != nil {
			t.Fatal(err)
		}
		cm += fmt.Sprintf("%d->%d id %d start 0 size %d\n", a, b, i+1, size)
	}
	p := filepath.Join(t.TempDir(), "flows.cm")
	if err := os.WriteFile(p, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	return mustRun(t, tp, "simccl-decompose", "--from-htsim", p)
}

// endNs is the latest end of a trace's rows.
func endNs(rows []trace.Row) int64 {
	var end int64
	for _, r := range rows {
		end = max(end, r.EndNs)
	}
	return end
}

// A link at half its bandwidth halves the rate of the one flow on it: 10 MB
// over GPU 0's 400 Gbps NIC link take 200 us plus the path's latency, at
// 0.5 400 us (fluid and busbw); a scaled link off its path changes nothing.
func TestFaultsLinkScaleHalvesRate(t *testing.T) {
	t.Parallel()
	st := htsimFlows(t, faultTree(t), "0->2 10000000")
	for _, m := range []string{"fluid", "busbw"} {
		healthy := rowsOf(t, mustRun(t, st, "flowsim-analytical", "--model", m))[0]
		lat := healthy.FctNs - 200_000 // 10e6 B * 8 / 400e9 bit/s
		if lat < 0 || lat > 10_000 {
			t.Fatalf("%s: healthy fct %d ns: want 200 us plus a path latency", m, healthy.FctNs)
		}
		half := rowsOf(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--link-scale", "0-16=0.5"))[0]
		if want := lat + 400_000; half.FctNs < want-1 || half.FctNs > want+1 {
			t.Errorf("%s: NIC link at 0.5: fct %d ns, want %d", m, half.FctNs, want)
		}
		off := rowsOf(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--link-scale", "4-18=0.5"))[0]
		if off.FctNs != healthy.FctNs {
			t.Errorf("%s: link 4-18 at 0.5, off the path: fct %d ns, healthy %d", m, off.FctNs, healthy.FctNs)
		}
	}
}

// A link halved from 50 us: the flow on it has sent 2.5 MB at 400 Gbps
// and sends the other 7.5 MB at 200 Gbps, ending at 350 us (plus the path
// latency); restored at 100 us, it sends 1.25 MB at 200 Gbps meanwhile and
// the last 6.25 MB at 400 Gbps, ending at 225 us (fluid and busbw). An
// AllToAll at collective granularity whose edge uplink drops to a quarter
// at t ends at t + (1 - t/T0) T1, as for a failure (fluid).
func TestFaultsLinkScaleAtTime(t *testing.T) {
	t.Parallel()
	tp := faultTree(t)
	st := htsimFlows(t, tp, "0->2 10000000")
	for _, m := range []string{"fluid", "busbw"} {
		lat := rowsOf(t, mustRun(t, st, "flowsim-analytical", "--model", m))[0].FctNs - 200_000
		for _, c := range []struct {
			args []string
			want int64
		}{
			{[]string{"--link-scale", "0-16=0.5@50us"}, 350_000},
			{[]string{"--link-scale", "0-16=0.5@50us", "--link-scale", "16-0=1@100us"}, 225_000},
		} {
			got := rowsOf(t, mustRun(t, st, "flowsim-analytical", append([]string{"--model", m}, c.args...)...))[0].FctNs - lat
			if got < c.want-1 || got > c.want+1 {
				t.Errorf("%s %v: fct %d ns past the latency, want %d", m, c.args, got, c.want)
			}
		}
	}
	coll := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--size", "64MiB", "--group", "dp", "--granularity", "collective")
	t0 := endNs(rowsOf(t, mustRun(t, coll, "flowsim-analytical")))
	t1 := endNs(rowsOf(t, mustRun(t, coll, "flowsim-analytical", "--link-scale", "16-24=0.25")))
	got := endNs(rowsOf(t, mustRun(t, coll, "flowsim-analytical", "--link-scale", "16-24=0.25@100us")))
	want := 100_000 + (1-100_000/float64(t0))*float64(t1)
	if t1 <= t0 || float64(got) < want-2 || float64(got) > want+2 {
		t.Errorf("AllToAll, uplink at 0.25 from 100 us: %d ns, want %.0f (T0 %d, T1 %d)", got, want, t0, t1)
	}
}

// Two 10 MB flows from edge 16's GPUs to another pod, on a seed that puts
// them on different uplinks (each at 400 Gbps: done in 200 us). Edge 16's
// uplink to agg 24 fails at 50 us: the flow on it moves to the other
// uplink, which the two share from then on, 7.5 MB left each at 200 Gbps:
// both end at 350 us (plus the path latency) instead of 200.
func TestFaultsLinkDownReroutes(t *testing.T) {
	t.Parallel()
	st := htsimFlows(t, faultTree(t), "0->4 10000000", "1->5 10000000")
	for seed := 1; seed <= 32; seed++ {
		s := strconv.Itoa(seed)
		healthy := rowsOf(t, mustRun(t, st, "flowsim-analytical", "--seed", s))
		if healthy[0].FctNs != healthy[1].FctNs || healthy[0].FctNs > 210_000 {
			continue // they share an uplink on this seed
		}
		lat := healthy[0].FctNs - 200_000
		rows, meta := readTrace(t, mustRun(t, st, "flowsim-analytical", "--seed", s, "--link-down", "16-24@50us"))
		if meta.Params["link_down"] != "16-24@50us" {
			t.Errorf("trace params %v: want link_down 16-24@50us", meta.Params)
		}
		want := lat + 50_000 + 300_000
		for _, r := range rows {
			if r.Status != trace.StatusOK || r.EndNs < want-2 || r.EndNs > want+2 {
				t.Errorf("seed %d: flow %d -> %d: status %s, end %d ns, want ok at %d", seed, r.Src, r.Dst, r.Status, r.EndNs, want)
			}
		}
		return
	}
	t.Fatal("no seed from 1 to 32 puts the two flows on different uplinks")
}

// A link down mid-collective at collective granularity: the COLL node in
// flight keeps the share of its work done at the healthy price and does
// the rest at the price without the link, so it ends at
// t + (1 - t/T0) T1, T0 and T1 its times with the link up and down from
// the start (an AllToAll over 16 GPUs: the down uplink doubles the load on
// edge 16's other one, so T1 > T0). Its exposed communication (the whole
// iteration here) rises by (1 - t/T0) (T1 - T0).
func TestFaultsLinkDownMidCollective(t *testing.T) {
	t.Parallel()
	st := mustRun(t, faultTree(t), "simccl-decompose", "--op", "alltoall", "--size", "64MiB", "--group", "dp", "--granularity", "collective")
	t0 := endNs(rowsOf(t, mustRun(t, st, "flowsim-analytical")))
	t1 := endNs(rowsOf(t, mustRun(t, st, "flowsim-analytical", "--link-down", "16-24")))
	if t1 <= t0 {
		t.Fatalf("link 16-24 down from the start: %d ns, healthy %d: want slower", t1, t0)
	}
	// busbw prices the collective alone as fluid does; one in flight
	// keeps its time there (contention-free: nothing else re-prices it).
	if b1 := endNs(rowsOf(t, mustRun(t, st, "flowsim-analytical", "--model", "busbw", "--link-down", "16-24"))); b1 != t1 {
		t.Errorf("busbw, link down from the start: %d ns, fluid %d", b1, t1)
	}
	r := run(t, st, "flowsim-analytical", "--model", "busbw", "--link-down", "16-24@100us")
	if b := endNs(rowsOf(t, r.stdout)); b != t0 {
		t.Errorf("busbw, link down at 100 us: %d ns, want the healthy %d (the collective was in flight)", b, t0)
	}
	if !strings.Contains(string(r.stderr), "COLL nodes then in flight keep the time they were priced at") {
		t.Errorf("busbw, link down at 100 us: stderr does not say the collective in flight ignored it:\n%s", r.stderr)
	}
	for _, at := range []int64{100_000, 600_000} {
		got := endNs(rowsOf(t, mustRun(t, st, "flowsim-analytical", "--link-down", fmt.Sprintf("16-24@%dns", at))))
		want := float64(at) + (1-float64(at)/float64(t0))*float64(t1)
		if d := float64(got) - want; d < -2 || d > 2 {
			t.Errorf("down at %d ns: ends at %d ns, want %.0f (T0 %d, T1 %d)", at, got, want, t0, t1)
		}
	}
}

// GPU 0's only link fails at 50 us: its 10 MB flow had sent 2.5 MB at 400
// Gbps; its row says failed, the run exits 1 naming it, the link and the
// 7.5 MB never delivered.
func TestFaultsNoPathFails(t *testing.T) {
	t.Parallel()
	st := htsimFlows(t, faultTree(t), "0->2 10000000", "4->6 1000000")
	out := filepath.Join(t.TempDir(), "down.parquet")
	r := run(t, st, "flowsim-analytical", "--link-down", "0-16@50us", "-o", out)
	oneLineError(t, r, 1, "link 0-16 went down", "1 failed flows", "7500000 bytes never delivered")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, data)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	// flowsim-packet's LINK_DOWN on the same link at the same time fails the
	// same flow, having delivered about as much (its in-flight packets are
	// lost with the link: a few percent more never arrive).
	pk := run(t, st, "flowsim-packet", "--set", "LINK_DOWN=50000 0 16", "-o", filepath.Join(t.TempDir(), "pk.parquet"))
	if pk.code != 1 || !strings.Contains(string(pk.stderr), "flow 0 failed at 50us") {
		t.Fatalf("packet: exit %d: %s", pk.code, pk.stderr)
	}
	var mib float64
	if _, err := fmt.Sscanf(lastField(string(pk.stderr), "status failed, "), "%fMiB never delivered", &mib); err != nil {
		t.Fatalf("packet: %v in %s", err, pk.stderr)
	}
	if lost := mib * (1 << 20); lost < 7_500_000 || lost > 7_500_000*1.05 {
		t.Errorf("packet: %.0f bytes never delivered, fluid 7500000: want packet within 5%% above", lost)
	}
	for _, r := range rows {
		want := trace.StatusOK
		if r.Src == 0 {
			want = trace.StatusFailed
		}
		if r.Status != want {
			t.Errorf("flow %d -> %d: status %q, want %q", r.Src, r.Dst, r.Status, want)
		}
	}
}

// Bytes are accounted when a failed NIC link cuts off part of a ring
// AllReduce (flow granularity, fluid and busbw): what the GPUs' NIC links
// carried (link loads) plus what the run says was never delivered is every
// byte of every transfer, to a byte per failed flow.
func TestFaultsNoPathBytesAccounted(t *testing.T) {
	t.Parallel()
	st := mustRun(t, faultTree(t), "simccl-decompose", "--op", "allreduce", "--size", "16MiB", "--group", "dp")
	for _, m := range []string{"fluid", "busbw"} {
		dir := t.TempDir()
		ll := filepath.Join(dir, "ll.parquet")
		r := run(t, st, "flowsim-analytical", "--model", m, "--link-down", "0-16@30us", "--link-loads", ll)
		if r.code != 1 {
			t.Fatalf("%s: exit %d, want 1: %s", m, r.code, r.stderr)
		}
		var failedRows, lost int64
		if _, err := fmt.Sscanf(lastField(string(r.stderr), "marks "), "%d failed flows (status failed, %d bytes never delivered)", &failedRows, &lost); err != nil {
			t.Fatalf("%s: %v in %s", m, err, r.stderr)
		}
		rows := rowsOf(t, r.stdout)
		var sent, failed int64
		for _, row := range rows {
			if row.ConnType == "DELAY" {
				continue
			}
			sent += row.SizeBytes
			if row.Status == trace.StatusFailed {
				failed++
			}
		}
		_, lrows, err := links.Read(ll)
		if err != nil {
			t.Fatal(err)
		}
		var up float64
		for _, l := range lrows {
			if l.Tier == "gpu-edge" {
				up += float64(l.Bytes)
			}
		}
		t.Logf("%s: %d failed rows, %d bytes lost; sent %d, NIC uplinks carried %.0f", m, failed, lost, sent, up)
		if failed == 0 || failed != failedRows || lost <= 0 {
			t.Fatalf("%s: %d failed rows (reported %d), %d bytes lost: want some", m, failed, failedRows, lost)
		}
		if d := up + float64(lost) - float64(sent); d < -float64(failed) || d > float64(failed) {
			t.Errorf("%s: delivered %.0f + never delivered %d = %.0f, sent %d", m, up, lost, up+float64(lost), sent)
		}
	}
}

// lastField is what follows the last occurrence of sep in s.
func lastField(s, sep string) string {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[i+len(sep):]
		}
	}
	return ""
}

// A link that does not exist, or a nonsense factor or time: exit 1 naming
// the flag and the field.
func TestFaultsBadInput(t *testing.T) {
	t.Parallel()
	st := htsimFlows(t, faultTree(t), "0->2 1000")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--link-down", "0-99@1us"}, []string{"--link-down 0-99@1us", "no link between nodes 0 and 99"}},
		{[]string{"--link-down", "0-2@1us"}, []string{"--link-down", "no link between nodes 0 and 2"}},
		{[]string{"--link-down", "leaf3-spine1@1us"}, []string{"--link-down", "A-B"}},
		{[]string{"--link-down", "0-16@1"}, []string{"--link-down 0-16@1", "missing unit"}},
		{[]string{"--link-scale", "0-16=0"}, []string{"--link-scale 0-16=0", "factor"}},
		{[]string{"--link-scale", "0-16"}, []string{"--link-scale 0-16", "A-B=FACTOR"}},
		{[]string{"--link-scale", "0-16=0.5@3"}, []string{"--link-scale 0-16=0.5@3", "missing unit"}},
		{[]string{"--link-scale", "0-16=NaN"}, []string{"--link-scale", "factor"}},
	} {
		oneLineError(t, run(t, st, "flowsim-analytical", c.args...), 1, c.want...)
	}
}

// A link down from the start carries nothing: every routing policy and
// both models route around it, at flow and at collective granularity, and
// the bytes (link loads of the NIC uplinks) are all still sent.
func TestFaultsDownLinkCarriesNothing(t *testing.T) {
	t.Parallel()
	tp := faultTree(t)
	flows := mustRun(t, tp, "simccl-decompose", "--op", "allreduce", "--size", "4MiB", "--group", "dp")
	coll := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--size", "16MiB", "--group", "dp", "--granularity", "collective")
	dir := t.TempDir()
	for _, st := range []struct {
		name string
		s    []byte
	}{{"flow", flows}, {"collective", coll}} {
		for _, m := range []string{"fluid", "busbw"} {
			for _, r := range []string{"ecmp", "spray", "adaptive"} {
				ll := filepath.Join(dir, st.name+m+r+".parquet")
				healthy := filepath.Join(dir, st.name+m+r+"-healthy.parquet")
				mustRun(t, st.s, "flowsim-analytical", "--model", m, "--routing", r, "--link-loads", healthy)
				mustRun(t, st.s, "flowsim-analytical", "--model", m, "--routing", r, "--link-down", "16-24", "--link-loads", ll)
				var up [2]float64
				for k, p := range []string{healthy, ll} {
					_, rows, err := links.Read(p)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range rows {
						if k == 1 && ((row.Src == 16 && row.Dst == 24) || (row.Src == 24 && row.Dst == 16)) && row.Bytes > 0 {
							t.Errorf("%s, %s, %s: the down link %d -> %d carried %d bytes", st.name, m, r, row.Src, row.Dst, row.Bytes)
						}
						if row.Tier == "gpu-edge" {
							up[k] += float64(row.Bytes)
						}
					}
				}
				if d := up[1] - up[0]; d < -1 || d > 1 {
					t.Errorf("%s, %s, %s: NIC uplinks carried %.0f bytes with 16-24 down, %.0f healthy", st.name, m, r, up[1], up[0])
				}
			}
		}
	}
}
