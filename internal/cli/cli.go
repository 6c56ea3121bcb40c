// Package cli holds what every fabricsim program shares: kong parsing with
// fabricsim's exit codes (0 ok, 1 bad input, 2 usage), input opening with a
// plain message when stdin is a terminal, and the version string.
package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/outfile"
	"github.com/fabricsim/fabricsim/pkg/units"
	"golang.org/x/term"
)

// Version is the fabricsim release every program reports.
const Version = "0.1.0"

// Producer is the header's producer string for a tool.
func Producer(tool string) string { return tool + " " + Version }

// UsageError is a command-line mistake (exit status 2), as opposed to bad
// input data (exit status 1).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef builds a UsageError.
func Usagef(format string, args ...any) error { return &UsageError{fmt.Errorf(format, args...)} }

// Main parses os.Args into cmd, runs run and exits with fabricsim's codes.
// Flag values that fail to parse as sizes, bandwidths or times are bad
// input (1); unknown flags and missing arguments are usage errors (2).
func Main(name, description string, cmd any, run func() error, opts ...kong.Option) {
	os.Exit(run1(name, description, cmd, run, os.Args[1:], os.Stderr, opts...))
}

func run1(name, description string, cmd any, run func() error, args []string, stderr io.Writer, opts ...kong.Option) int {
	exit := -1
	opts = append([]kong.Option{
		kong.Name(name), kong.Description(description), kong.UsageOnError(),
		kong.Exit(func(code int) { exit = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	}, opts...)
	k, err := kong.New(cmd, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "%s: internal error: %v\n", name, err)
		return 3
	}
	k.Stderr = stderr
	_, err = k.Parse(negativeValues(args))
	if exit >= 0 { // --help
		return exit
	}
	if err != nil {
		var pe *units.ParseError
		if errors.As(err, &pe) {
			fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
			return 1
		}
		// A flag's file that cannot be read (type:"existingfile") is bad
		// input, as a positional input file is; kong's message reads
		// "--workload: stat PATH: no such file or directory".
		var fe *fs.PathError
		if errors.As(err, &fe) {
			flag, _, _ := strings.Cut(err.Error(), ": ")
			fmt.Fprintf(stderr, "%s: %s %s: %s\n", name, flag, fe.Path, fe.Err)
			return 1
		}
		// A directory where a flag wants a file is bad input too; kong
		// says so in a plain error ('--workload: "DIR" exists but is a
		// directory').
		if strings.HasSuffix(err.Error(), " exists but is a directory") {
			fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
			return 1
		}
		fmt.Fprintf(stderr, "%s: %s (see %s --help)\n", name, oneLine(err.Error()), name)
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
		var ue *UsageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// negativeValues joins a long flag and a value after it that starts with
// a minus and a digit ("--nic-bw -5Gbps" -> "--nic-bw=-5Gbps"), so the
// value reaches its parser and is refused as a value, with exit 1 naming
// the flag. kong took it for a short flag ("expected value value but got
// "-5Gbps" (short flag)", exit 2); no program has a digit short flag, so
// such a command line failed either way.
func negativeValues(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i+1 < len(args) && a != "--" && strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && negativeNumber(args[i+1]) {
			a += "=" + args[i+1]
			i++
		}
		out = append(out, a)
		if args[i] == "--" {
			return append(out, args[i+1:]...)
		}
	}
	return out
}

func negativeNumber(s string) bool {
	return len(s) > 1 && s[0] == '-' && (s[1] >= '0' && s[1] <= '9' || s[1] == '.')
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// IsTerminal reports whether f is an interactive terminal (not merely a
// character device: /dev/null is one too).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// OpenInput opens path, or stdin when path is "" or "-". With stdin a
// terminal it refuses plainly instead of waiting for input that never comes.
func OpenInput(path, hint string) (io.ReadCloser, string, error) {
	if path == "" || path == "-" {
		if IsTerminal(os.Stdin) {
			return nil, "", Usagef("no input: stdin is a terminal; %s", hint)
		}
		return io.NopCloser(os.Stdin), "<stdin>", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

// CheckBinaryStdout refuses to write a binary stream to a terminal.
func CheckBinaryStdout(what string) error {
	if IsTerminal(os.Stdout) {
		return Usagef("stdout is a terminal: pipe the %s into another program or redirect it to a file", what)
	}
	return nil
}

// CreateOutput opens a program's -o/--out destination: the file at path,
// else stdout. binary names what is written when it is not text ("stream"),
// and then a terminal stdout is refused. The caller ends with
// err = done(err): on success the file is completed and put at path (its
// last write may fail only there), on failure nothing is left at path and
// a device written in place is left alone (outfile).
func CreateOutput(path, binary string) (w io.Writer, done func(error) error, err error) {
	if path != "" {
		f, err := outfile.Create(path)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Finish, nil
	}
	if binary != "" {
		if err := CheckBinaryStdout(binary); err != nil {
			return nil, nil, err
		}
	}
	return os.Stdout, func(err error) error { return err }, nil
}

// WriteStream writes a fabricsim stream to path (stdout when empty, never
// a terminal) as producer: body writes the records; the stream and the
// file are closed after it, and the first error of the three is returned.
func WriteStream(path, producer string, body func(*stream.Writer) error) (err error) {
	out, done, err := CreateOutput(path, "stream")
	if err != nil {
		return err
	}
	defer func() { err = done(err) }()
	w, err := stream.NewWriter(out, Producer(producer))
	if err != nil {
		return err
	}
	if err := body(w); err != nil {
		return err
	}
	return w.Close()
}

// CheckTraceOut validates a trace destination before any work: a known
// extension for --out, or a stdout that is not a terminal.
func CheckTraceOut(out string) error {
	if out != "" {
		if _, err := trace.ContainerForPath(out); err != nil {
			return Usagef("--out %v", err)
		}
		return nil
	}
	return CheckBinaryStdout("Arrow trace")
}

// OpenStream opens a program's input stream (a file or stdin) and reads
// its header.
func OpenStream(path, hint string) (*stream.Reader, io.Closer, error) {
	rc, name, err := OpenInput(path, hint)
	if err != nil {
		return nil, nil, err
	}
	sr, err := stream.NewReader(rc, name)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return sr, rc, nil
}

// SendLatency is the per-flow send latency in ps: the flag's value when
// given, else SimAI's AS_SEND_LAT environment variable (microseconds).
func SendLatency(flagPs int64) (int64, error) {
	if flagPs > 0 {
		return flagPs, nil
	}
	v := os.Getenv("AS_SEND_LAT")
	if v == "" {
		return 0, nil
	}
	us, err := strconv.ParseFloat(v, 64)
	if err != nil || !(us >= 0 && us <= 1e9) { // NaN fails both
		return 0, fmt.Errorf("environment AS_SEND_LAT=%q is not a latency in us (0 to 1e9)", v)
	}
	return int64(us * 1e6), nil
}

// BackendSendLatency is the latency (ps) a backend adds before every
// transfer of a stream whose collectives are colls: --send-lat (flagPs)
// when given, always on top of the stream's step latencies; else
// AS_SEND_LAT, unless simccl-decompose applied it already (SimAI replay:
// the collectives carry send_lat_ps and the flows' step latencies are
// it), in which case nothing is added. On a stream decomposed without it,
// AS_SEND_LAT still adds, with a warning that SimAI's meaning (in place
// of NCCL's latencies) comes from setting it for simccl-decompose.
func BackendSendLatency(prog string, flagPs int64, colls map[int64]*stream.Collective) (int64, error) {
	if flagPs > 0 {
		return flagPs, nil
	}
	env, err := SendLatency(0)
	if err != nil || env == 0 {
		return 0, err
	}
	replayed, latencies := false, false
	for _, c := range colls {
		switch {
		case c.SendLatPs > 0 && c.SendLatPs != env:
			return 0, fmt.Errorf("environment AS_SEND_LAT=%s us, but collective %d was decomposed with send_lat_ps %d (%s us): set the same value for simccl-decompose and %s, or leave it out here",
				os.Getenv("AS_SEND_LAT"), c.ID, c.SendLatPs, strconv.FormatFloat(float64(c.SendLatPs)/1e6, 'g', -1, 64), prog)
		case c.SendLatPs > 0:
			replayed = true
		case c.Op != stream.OpCompute:
			latencies = true
		}
	}
	if replayed {
		return 0, nil
	}
	if latencies {
		fmt.Fprintf(os.Stderr, "%s: warning: AS_SEND_LAT adds %s us before every transfer, on top of the stream's NCCL step latencies; for SimAI's meaning (in their place) set it for simccl-decompose\n",
			prog, os.Getenv("AS_SEND_LAT"))
	}
	return env, nil
}

// WriteTrace writes flow i's row for each i < n that has one (row(i, r)
// fills r and returns true; false leaves r alone and writes nothing)
// to the trace destination (see TraceWriter). On any error the trace is
// aborted, so that no partial trace with a valid footer is left looking
// complete. The rows are encoded on another goroutine (trace.Async)
// while row builds the next ones: on a 2048-GPU AllToAll's 4.2 M flows
// building the rows takes about 0.4 s of CPU after the event loop and
// encoding them about 0.9 s beside it. Async's Write only queues a row:
// an encoder's error (a full disk) comes from Close, which aborts.
func WriteTrace(out string, meta trace.Meta, n int, row func(i int32, r *trace.Row) bool) error {
	w, err := TraceWriter(out, meta)
	if err != nil {
		return err
	}
	w = trace.Async(w)
	// One row for all: declared in the loop, it escaped to the heap once
	// a row (4.2 M rows, 1 GB of fresh memory: WriteTrace 1.46 s of CPU
	// against 0.24 s at SIMULATOR_STOP_TIME=1us, pprof, GOGC=off).
	// Filled in place: returning the ~300-byte Row by value zeroed and
	// copied it for every flow, written or not (this loop and
	// flowsim-packet's callback 29.9 M of 618 M Ir on a 114 k-flow case
	// at SIMULATOR_STOP_TIME=1ps, 4.1 M filled in place; cachegrind).
	var r trace.Row
	for i := int32(0); i < int32(n); i++ {
		if !row(i, &r) {
			continue
		}
		if err := w.Write(&r); err != nil {
			trace.Abort(w)
			return err
		}
	}
	return w.Close()
}

// TraceWriter opens the trace destination checked by CheckTraceOut: the
// file named by out, else an Arrow IPC stream on stdout.
func TraceWriter(out string, meta trace.Meta) (trace.Writer, error) {
	if out != "" {
		return trace.Create(out, meta)
	}
	return trace.NewWriter(os.Stdout, trace.ArrowStream, meta)
}
