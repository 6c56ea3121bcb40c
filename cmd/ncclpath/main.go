// Command ncclpath runs NCCL's path computation on the servers of a
// topology stream and adds the result as a paths record, or prints it as an
// nvidia-smi topo -m style matrix or as JSON.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

type command struct {
	// Accepted as every program accepts it; this one ends well within
	// the two seconds before progress would be drawn.
	progress.Quiet
	Input     string `arg:"" optional:"" help:"Input stream (default: stdin)."`
	Server    string `help:"Server template for every server: dgx-a100, hgx-a800, dgx-h100, hgx-h800, dgx-b200, pcie-2s (default: chosen by the topology's GPU type)."`
	ServerXML string `name:"server-xml" help:"NCCL topology XML of the server (what NCCL_TOPO_DUMP_FILE writes on a real machine) instead of a template."`
	Matrix    bool   `help:"Print an nvidia-smi topo -m style table (GPUs and NICs, each cell the path type from row to column) instead of the stream."`
	JSON      bool   `name:"json" help:"Print every path (type, GB/s, hops, P2P/GDR verdicts), each GPU's NICs and the PXN proxies as JSON instead of the stream."`
	BW        bool   `name:"bw" help:"With --matrix, show each cell as TYPE/bandwidth in GB/s (1 GB = 1e9 B) as NCCL counts it."`
	Version   string `name:"nccl-version" placeholder:"V" help:"NCCL release whose rules to reproduce, e.g. 2.19 or 2.27.7 (default 2.27)."`

	P2PLevel   string `name:"p2p-level" placeholder:"LEVEL" group:"NCCL settings (flags override the environment)" help:"NCCL_P2P_LEVEL: worst GPU-GPU path using P2P: LOC, NVL, PIX, PXB, PHB, SYS (default: NCCL's for the CPU)."`
	P2PDisable *bool  `name:"p2p-disable" negatable:"" group:"NCCL settings (flags override the environment)" help:"NCCL_P2P_DISABLE=1: no P2P transport between GPUs."`
	GDRLevel   string `name:"gdr-level" placeholder:"LEVEL" group:"NCCL settings (flags override the environment)" help:"NCCL_NET_GDR_LEVEL: worst GPU-NIC path using GPUDirect RDMA (default PXB)."`
	PXNDisable *bool  `name:"pxn-disable" negatable:"" group:"NCCL settings (flags override the environment)" help:"NCCL_PXN_DISABLE=1: GPUs never send through a peer GPU's NIC."`
	NVBDisable *bool  `name:"nvb-disable" negatable:"" group:"NCCL settings (flags override the environment)" help:"NCCL_NVB_DISABLE=1: GPUs never relay NVLink traffic for other GPUs."`

	Out string `short:"o" help:"Write to FILE instead of stdout."`
}

const description = `Compute NCCL's paths inside each server and add them to the stream.

Reads topogen's stream, picks the server model from the topology's GPU type (A100/A800
dgx-a100, H100/H200/H20 dgx-h100, H800 hgx-h800, B200 dgx-b200) unless --server or
--server-xml names one, runs NCCL's path computation once per distinct server model and
writes a paths record right after the topology record; everything else passes through
unchanged. Paths records already in the input are replaced.

Examples:
  topogen --family spectrum-x --gpus 128 | ncclpath | simccl-decompose --op allreduce --size 64MiB --tp 8 --summary
  ncclpath --server dgx-h100 --matrix
  ncclpath --server pcie-2s --matrix --bw
  ncclpath --server-xml examples/servers/dgx-a100.xml --json
  topogen --gpus 16 --gpu-type A100 | ncclpath --pxn-disable --gdr-level PHB | ...

With --server or --server-xml, --matrix and --json need no input (stdin is read only when
something is piped in, to check the server against the topology).

Environment (flags win): NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NET_GDR_LEVEL,
NCCL_NET_GDR_READ, NCCL_NET_GDR_C2C, NCCL_PXN_DISABLE, NCCL_PXN_C2C, NCCL_NVB_DISABLE,
read as NCCL reads them.`

func main() {
	var c command
	cli.Main("ncclpath", description, &c, c.run)
}

const inputHint = "pipe a topology in (topogen --gpus 16 | ncclpath), or give --server/--server-xml with --matrix or --json"

func (c *command) run() error {
	switch {
	case c.Server != "" && c.ServerXML != "":
		return cli.Usagef("give either --server or --server-xml, not both")
	case c.Matrix && c.JSON:
		return cli.Usagef("give either --matrix or --json, not both")
	case c.BW && !c.Matrix:
		return cli.Usagef("--bw changes --matrix only (the stream and --json always carry bandwidths)")
	}
	opt, err := c.options()
	if err != nil {
		return err
	}
	// Load a named server before reading input, so a bad name or XML fails at once.
	var sys *ncclpath.System
	if c.Server != "" || c.ServerXML != "" {
		if sys, err = c.namedSystem(); err != nil {
			return err
		}
	}
	if c.Matrix || c.JSON {
		return c.report(sys, opt)
	}
	return c.filter(sys, opt)
}

// options reads NCCL's environment like NCCL does, then applies the flags.
func (c *command) options() (ncclpath.Options, error) {
	opt, err := ncclpath.OptionsFromEnv(nil)
	if err != nil {
		return opt, fmt.Errorf("environment: %v", err)
	}
	if c.Version != "" {
		if _, err := ncclpath.ParseVersion(c.Version); err != nil {
			return opt, cli.Usagef("--nccl-version: %v", err)
		}
		opt.Version = c.Version
	}
	if c.P2PLevel != "" {
		if _, err := ncclpath.ParseLevel(c.P2PLevel); err != nil {
			return opt, cli.Usagef("--p2p-level: %v", err)
		}
		opt.P2PLevel = c.P2PLevel
	}
	if c.GDRLevel != "" {
		if _, err := ncclpath.ParseLevel(c.GDRLevel); err != nil {
			return opt, cli.Usagef("--gdr-level: %v", err)
		}
		opt.GDRLevel = c.GDRLevel
	}
	for _, f := range []struct {
		flag *bool
		dst  *bool
	}{{c.P2PDisable, &opt.P2PDisable}, {c.PXNDisable, &opt.PXNDisable}, {c.NVBDisable, &opt.NVBDisable}} {
		if f.flag != nil {
			*f.dst = *f.flag
		}
	}
	return opt, opt.Validate()
}

func (c *command) namedSystem() (*ncclpath.System, error) {
	if c.Server != "" {
		return ncclpath.Template(c.Server)
	}
	f, err := os.Open(c.ServerXML)
	if err != nil {
		return nil, trace.PathError(c.ServerXML, err)
	}
	defer f.Close()
	sys, err := ncclpath.ParseXML(f, c.ServerXML)
	if err == nil {
		for _, w := range sys.Warnings {
			fmt.Fprintf(os.Stderr, "ncclpath: warning: %s\n", w)
		}
	}
	return sys, err
}

// compute picks the server for a topology (the named one, else by GPU
// type), runs the path computation and checks the GPU count.
func compute(sys *ncclpath.System, top *stream.Topology, opt ncclpath.Options) (*ncclpath.Result, error) {
	if sys == nil {
		name, err := ncclpath.TemplateForGPU(top.GPUType)
		if err != nil {
			return nil, fmt.Errorf("topology: %v; give --server or --server-xml", err)
		}
		if sys, err = ncclpath.Template(name); err != nil {
			return nil, err
		}
	}
	res, err := ncclpath.Compute(sys, opt)
	if err != nil {
		return nil, err
	}
	if top != nil && len(res.GPUs) != top.GPUsPerServer {
		return nil, fmt.Errorf("server model %s has %d GPUs but the topology has %d GPUs per server; give --server or --server-xml with a matching server",
			res.Server, len(res.GPUs), top.GPUsPerServer)
	}
	if top == nil {
		return res, nil
	}
	if spec, ok := topo.GPUSpecs[top.GPUType]; ok && len(res.GPUs) > 0 && res.GPUs[0].SM != spec.CC {
		// The server's GPUs decide NCCL's bandwidths (as NCCL reads them
		// from the machine), not the topology's type: say so.
		fmt.Fprintf(os.Stderr, "ncclpath: warning: server model %s has sm %d GPUs but the topology's are %s (sm %d): the paths and NCCL's bandwidths follow the server\n",
			res.Server, res.GPUs[0].SM, top.GPUType, spec.CC)
	}
	return res, nil
}

// filter is the pipeline mode: forward the stream, adding the paths record
// after the topology.
func (c *command) filter(sys *ncclpath.System, opt ncclpath.Options) error {
	r, in, err := cli.OpenStream(c.Input, inputHint)
	if err != nil {
		return err
	}
	defer in.Close()
	return cli.WriteStream(c.Out, "ncclpath", func(w *stream.Writer) error { return forward(r, w, sys, opt) })
}

// forward copies the stream from r to w, adding the paths record after
// the topology (and dropping an earlier one).
func forward(r *stream.Reader, w *stream.Writer, sys *ncclpath.System, opt ncclpath.Options) error {
	var top *stream.Topology
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch kind {
		case stream.KindTopology:
			raw, err := r.Raw()
			if err != nil {
				return err
			}
			// Decoded from the kept bytes so the record is forwarded byte for
			// byte, keys this version does not know included.
			if top, err = stream.DecodeRaw(kind, raw, r.Name(), r.Index(), (*stream.Reader).Topology); err != nil {
				return err
			}
			if err := w.RawRecord(kind, raw); err != nil {
				return err
			}
			// topogen's servers are identical (one GPU type, one size), so one
			// computation and one record cover them all.
			res, err := compute(sys, top, opt)
			if err != nil {
				return err
			}
			if err := w.Paths(res.StreamPaths(nil)); err != nil {
				return err
			}
		case stream.KindPaths:
			// An earlier ncclpath's result: superseded by the one written above.
		default:
			if err := w.Forward(r); err != nil {
				return err
			}
		}
	}
	if top == nil {
		return fmt.Errorf("%s: no topology record (pipe topogen's output in)", r.Name())
	}
	return nil
}

// report prints the matrix or JSON of one server: the named one, or the
// one the input topology's GPU type selects.
func (c *command) report(sys *ncclpath.System, opt ncclpath.Options) (err error) {
	top, err := c.reportTopology(sys != nil)
	if err != nil {
		return err
	}
	res, err := compute(sys, top, opt)
	if err != nil {
		return err
	}
	out, done, err := cli.CreateOutput(c.Out, "")
	if err != nil {
		return err
	}
	defer func() { err = done(err) }()
	bw := bufio.NewWriter(out)
	if c.JSON {
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		err = enc.Encode(res.Report())
	} else {
		_, err = io.WriteString(bw, res.MatrixText(c.BW)+legend(res, c.BW))
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// reportTopology reads the input's topology for --matrix/--json. With a
// named server the topology is optional: a terminal or empty stdin means
// none, so `ncclpath --server dgx-h100 --matrix` neither blocks nor fails.
func (c *command) reportTopology(named bool) (*stream.Topology, error) {
	var r *stream.Reader
	var err error
	if named && (c.Input == "" || c.Input == "-") {
		if cli.IsTerminal(os.Stdin) {
			return nil, nil
		}
		br := bufio.NewReader(os.Stdin)
		if _, err := br.Peek(1); err == io.EOF {
			return nil, nil
		}
		if r, err = stream.NewReader(br, "<stdin>"); err != nil {
			return nil, err
		}
	} else {
		var in io.Closer
		if r, in, err = cli.OpenStream(c.Input, inputHint); err != nil {
			return nil, err
		}
		defer in.Close()
	}
	return stream.ReadTopology(r)
}

// pathMeaning explains the path types as nvidia-smi topo -m's legend does.
var pathMeaning = []struct{ typ, text string }{
	{"LOC", "the same device"},
	{"NVL", "NVLink, directly or through an NVSwitch"},
	{"NVB", "NVLink through one intermediate GPU"},
	{"C2C", "chip-to-chip link between a GPU and its CPU (Grace)"},
	{"PIX", "at most one PCIe switch"},
	{"PXB", "several PCIe switches, no host bridge"},
	{"P2C", "GPU to its CPU by C2C, then PCIe to the NIC"},
	{"PXN", "through a peer GPU over NVLink, then that GPU's PCIe path (PXN)"},
	{"PHB", "through a PCIe host bridge (the CPU)"},
	{"SYS", "across the inter-socket link (QPI/UPI/xGMI)"},
	{"NET", "through the network"},
	{"DIS", "disconnected"},
}

// legend lists the path types the matrix uses, and the unit of its
// bandwidths when it shows them.
func legend(res *ncclpath.Result, withBW bool) string {
	used := map[string]bool{}
	for _, row := range res.Matrix(false)[1:] {
		for _, cell := range row[1:] {
			used[cell] = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nLegend (%s, NCCL %s rules; row = source, column = destination):\n", res.Server, res.NCCLVersion)
	b.WriteString("  X    = self\n")
	if withBW {
		b.WriteString("  TYPE/BW = the path type and its bandwidth in GB/s (1 GB = 1e9 B), as NCCL counts it\n")
	}
	for _, m := range pathMeaning {
		if used[m.typ] {
			fmt.Fprintf(&b, "  %-4s = %s\n", m.typ, m.text)
		}
	}
	return b.String()
}
