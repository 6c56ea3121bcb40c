// Command phyrun executes a flow stream's DAG as real data transfers
// between processes over TCP, each flow moved NCCL-proxy style through a
// FIFO of NCCL_STEPS steps, and writes the measured flow trace.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/phy"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	progress.Quiet
	Launch  string         `default:"local:2" help:"Where to run: local:N starts N worker processes on this machine; ranks are spread over them by server."`
	Out     string         `short:"o" placeholder:"FILE" help:"Write the trace to FILE (.parquet, .arrow, .arrows). Default: Arrow IPC stream on stdout."`
	Step    units.Size     `default:"512KiB" help:"Bytes per FIFO step (NCCL Simple's step is 512 KiB)."`
	Timeout units.Duration `default:"10min" help:"Give up after this long."`
	Input   string         `arg:"" optional:"" placeholder:"STREAM" help:"Stream file to read (default: stdin)."`

	Worker   bool   `hidden:"" help:"Run as a worker (started by phyrun itself)."`
	Coord    string `hidden:""`
	WorkerID int    `hidden:"" name:"worker-id"`
}

const description = `Run a flow stream's DAG as real transfers between processes and write the measured trace.

Each transfer moves its bytes over TCP between the worker processes hosting its source and
destination ranks (ranks of one server share a worker; transfers inside a server are local
copies, and transfers between servers cross a socket even when one worker hosts both), in steps through an NCCL_STEPS=8 slot FIFO with at most eight steps outstanding;
every byte is checked on arrival. Delay nodes sleep for their delay. Times are wall-clock ns
since the start; the ideal FCT comes from an idle 16 MiB transfer measured first.

Examples:
  topogen --gpus 16 | simccl-decompose --op allreduce --size 64MiB --group dp --tp 8 | phyrun --launch local:2 | fctstats
  phyrun --launch local:4 --out run.parquet flows.stream`

func main() {
	var c command
	cli.Main("phyrun", description, &c, c.run)
}

func (c *command) run() error {
	if c.Worker {
		return phy.RunWorker(c.Coord, c.WorkerID, os.Getenv(phy.TokenEnv))
	}
	kind, n, ok := strings.Cut(c.Launch, ":")
	workers, err := strconv.Atoi(n)
	if !ok || kind != "local" || err != nil || workers < 1 || workers > 256 {
		return cli.Usagef("--launch %q: expected local:N with N in 1..256", c.Launch)
	}
	if c.Step < 1024 {
		return cli.Usagef("--step %s: at least 1KiB", c.Step)
	}
	if err := cli.CheckTraceOut(c.Out); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sr, rc, err := cli.OpenStream(c.Input, "pipe a stream in, e.g. topogen | simccl-decompose | phyrun")
	if err != nil {
		return err
	}
	defer rc.Close()
	limit, err := cli.MemoryBudget()
	if err != nil {
		return err
	}
	set, err := flowset.ReadBudget(sr, flowset.Budget{Backend: "phyrun", PerFlow: 200, Limit: limit})
	if err != nil {
		return err
	}
	if err := set.RefuseColl("phyrun"); err != nil {
		return err
	}
	wall := time.Now()
	meter := c.Meter("phyrun")
	defer meter.Stop()
	opt := phy.Options{Workers: workers, StepSize: int64(c.Step), Exec: self,
		Timeout: time.Duration(c.Timeout / 1000), WorkerArgs: phy.WorkerArgs}
	if meter != nil {
		opt.Progress = func(done, total int) { meter.Set(int64(done), int64(total), "") }
	}
	res, cal, err := phy.Run(set, opt)
	meter.Stop()
	if err != nil {
		return err
	}
	meta := trace.Meta{Backend: "phy", Params: map[string]any{"launch": c.Launch, "step_bytes": int64(c.Step),
		"calibration_gbps": cal.BytesPerNs * 8, "calibration_latency_ns": cal.LatencyNs},
		Topology: set.TopologyMeta(), Rows: int64(set.Flows()), Notes: set.Notes}
	var end des.Time
	for _, r := range res {
		end = max(end, r.End)
	}
	rows := set.Rows()
	if err := cli.WriteTrace(c.Out, meta, set.Flows(), func(i int32, r *trace.Row) bool {
		*r = rows.Row(i, res[i])
		return true
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "phyrun: %d workers, %d flows, %s moved, took %s (calibrated %.2f Gbps, %d ns latency), wall %.2f s\n",
		workers, set.Flows(), units.HumanSize(set.TotalBytes()), time.Duration(end.Ns()), cal.BytesPerNs*8, cal.LatencyNs, time.Since(wall).Seconds())
	return nil
}
