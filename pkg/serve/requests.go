// Package serve simulates LLM inference serving on a fabric: requests
// prefilled on prefill replicas, their KV caches moved to decode replicas
// as flows that share the fabric's links max-min fairly, and decoded
// under a continuous-batching scheduler (simccl-serve).
package serve

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// Request is one inference request of a trace.
type Request struct {
	ID      int64
	Arrival des.Time // since the trace's start
	Prefill int64    // prompt (context) tokens, >= 1
	Decode  int64    // output tokens, >= 1; the first comes out of prefill
}

// maxArrival bounds arrivals, in seconds (11.6 days): the run's
// picosecond clock then has room for any realistic serving time after.
const maxArrival = 1e6

// maxTokens bounds a request's token counts: far beyond any context
// window, small enough that token products stay exact in float64.
const maxTokens = 1 << 24

// The two CSV layouts read: Vidur's (and SimAI 1.5's, which takes Vidur's
// traces) and the Azure LLM inference trace's, the Splitwise paper's.
var (
	vidurColumns = []string{"arrived_at", "num_prefill_tokens", "num_decode_tokens"}
	azureColumns = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
)

// azureTime is the Azure trace's TIMESTAMP layout (7 fractional digits).
const azureTime = "2006-01-02 15:04:05.9999999"

// ReadRequests reads a request trace in CSV, called name in errors: a
// header naming Vidur's columns (arrived_at in seconds,
// num_prefill_tokens, num_decode_tokens) or the Azure trace's
// (TIMESTAMP, ContextTokens, GeneratedTokens; arrival is the time since
// the first row's), other columns ignored. Rows come back in arrival
// order (stable), ids are the rows' order in the file from 0. A missing
// column, a token count below 1 or not an integer, an arrival that is
// negative, not finite or unreadable is refused with one line naming the
// line and column.
func ReadRequests(name string, r io.Reader) ([]Request, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty: want a header line with %s", name, strings.Join(vidurColumns, ","))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", name, csvErr(err))
	}
	head = slices.Clone(head) // ReuseRecord: later reads overwrite it
	if len(head) > 0 {        // a UTF-8 byte order mark before the first name
		head[0] = strings.TrimPrefix(head[0], "\ufeff")
	}
	cols, azure, err := findColumns(head)
	if err != nil {
		return nil, fmt.Errorf("%s: line 1: %v", name, err)
	}
	var (
		reqs  []Request
		first time.Time
	)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s", name, csvErr(err))
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		field := func(i int) (string, error) {
			if cols[i] >= len(rec) {
				return "", fmt.Errorf("%s: line %d: column %q: missing (the row has %d fields)", name, line, head[cols[i]], len(rec))
			}
			return strings.TrimSpace(rec[cols[i]]), nil
		}
		var q Request
		q.ID = int64(len(reqs))
		s, err := field(0)
		if err != nil {
			return nil, err
		}
		if azure {
			t, perr := time.Parse(azureTime, s)
			if perr != nil {
				return nil, fmt.Errorf("%s: line %d: column %q: %q is not a time such as 2023-11-16 18:15:46.6805900", name, line, head[cols[0]], clip(s))
			}
			if len(reqs) == 0 {
				first = t
			}
			d := t.Sub(first)
			if d < 0 {
				return nil, fmt.Errorf("%s: line %d: column %q: %s is before the first row's %s", name, line, head[cols[0]], clip(s), first.Format(azureTime))
			}
			if d.Seconds() > maxArrival {
				return nil, fmt.Errorf("%s: line %d: column %q: %s is more than 1e6 s after the first row's %s", name, line, head[cols[0]], clip(s), first.Format(azureTime))
			}
			q.Arrival = des.Time(d.Nanoseconds()) * 1000
		} else {
			v, perr := strconv.ParseFloat(s, 64)
			if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxArrival {
				return nil, fmt.Errorf("%s: line %d: column %q: %q is not a time in seconds from 0 to 1e6", name, line, head[cols[0]], clip(s))
			}
			q.Arrival = des.FromSeconds(v)
		}
		for k, dst := range []*int64{&q.Prefill, &q.Decode} {
			s, err := field(k + 1)
			if err != nil {
				return nil, err
			}
			n, perr := parseTokens(s)
			if perr != nil {
				return nil, fmt.Errorf("%s: line %d: column %q: %v", name, line, head[cols[k+1]], perr)
			}
			*dst = n
		}
		reqs = append(reqs, q)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests after the header", name)
	}
	slices.SortStableFunc(reqs, func(a, b Request) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return reqs, nil
}

// findColumns locates the three columns of either layout in a header.
func findColumns(head []string) (cols [3]int, azure bool, err error) {
	idx := map[string]int{}
	for i, h := range head {
		if _, dup := idx[strings.TrimSpace(h)]; !dup {
			idx[strings.TrimSpace(h)] = i
		}
	}
	want := vidurColumns
	if _, ok := idx[azureColumns[0]]; ok {
		if _, v := idx[vidurColumns[0]]; !v {
			want, azure = azureColumns, true
		}
	}
	for i, c := range want {
		j, ok := idx[c]
		if !ok {
			return cols, false, fmt.Errorf("missing column %q: the header must name %s (Vidur/SimAI) or %s (Azure LLM inference trace)",
				c, strings.Join(vidurColumns, ","), strings.Join(azureColumns, ","))
		}
		cols[i] = j
	}
	return cols, azure, nil
}

// parseTokens reads a token count: an integer from 1 to maxTokens (a
// whole float such as 512.0, as pandas writes integer columns with gaps,
// is accepted).
func parseTokens(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > maxTokens {
			return 0, fmt.Errorf("%q is not a whole number of tokens", clip(s))
		}
		n = int64(f)
	}
	switch {
	case n < 0:
		return 0, fmt.Errorf("%d tokens is negative", n)
	case n == 0:
		return 0, errors.New("0 tokens: a request has at least 1 prompt and 1 output token")
	case n > maxTokens:
		return 0, fmt.Errorf("%d tokens is more than %d", n, maxTokens)
	}
	return n, nil
}

func csvErr(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d: %v", pe.Line, pe.Err)
	}
	return err.Error()
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Arrivals name the synthetic arrival processes.
var Arrivals = []string{"poisson", "gamma", "fixed"}

// Synthetic describes a generated trace.
type Synthetic struct {
	N       int     // requests
	Process string  // poisson, gamma, fixed
	Rate    float64 // requests per second
	CV      float64 // gamma: coefficient of variation of the gaps (1 is Poisson)
	Prefill Lengths
	Decode  Lengths
	Seed    uint64
}

// Lengths is a token length distribution: fixed (Lo == Hi) or uniform on
// [Lo, Hi].
type Lengths struct{ Lo, Hi int64 }

// ParseLengths reads N (fixed) or LO-HI (uniform, inclusive).
func ParseLengths(s string) (Lengths, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := parseTokens(lo)
	b := a
	if err == nil && isRange {
		b, err = parseTokens(hi)
	}
	if err != nil {
		return Lengths{}, fmt.Errorf("%q: want N or LO-HI tokens: %v", s, err)
	}
	if b < a {
		return Lengths{}, fmt.Errorf("%q: the range ends below its start", s)
	}
	return Lengths{a, b}, nil
}

func (l Lengths) draw(r *rand.Rand) int64 {
	if l.Hi == l.Lo {
		return l.Lo
	}
	return l.Lo + r.Int64N(l.Hi-l.Lo+1)
}

// Generate draws the trace: the first request at 0, then gaps of mean
// 1/Rate, exponential (poisson), gamma with the given CV, or constant
// (fixed). Deterministic for a Seed.
func (s Synthetic) Generate() ([]Request, error) {
	if s.N < 1 || s.N > 1<<24 {
		return nil, fmt.Errorf("--requests %d: want 1 to %d", s.N, 1<<24)
	}
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) || float64(s.N)/s.Rate > maxArrival/2 {
		return nil, fmt.Errorf("--rate %g: want a positive number of requests per second that brings --requests %d in within 5e5 s", s.Rate, s.N)
	}
	if !slices.Contains(Arrivals, s.Process) {
		return nil, fmt.Errorf("--arrivals %q: want one of %s", s.Process, strings.Join(Arrivals, ", "))
	}
	if s.Process == "gamma" && !(s.CV > 0 && s.CV < 100) {
		return nil, fmt.Errorf("--cv %g: want a coefficient of variation above 0 and below 100", s.CV)
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x5e12e5e12e))
	reqs := make([]Request, s.N)
	at := 0.0
	for i := range reqs {
		if i > 0 {
			mean := 1 / s.Rate
			switch s.Process {
			case "poisson":
				at += r.ExpFloat64() * mean
			case "gamma":
				k := 1 / (s.CV * s.CV)
				at += gamma(r, k) * mean / k
			default:
				at += mean
			}
		}
		reqs[i] = Request{ID: int64(i), Arrival: des.FromSeconds(at), Prefill: s.Prefill.draw(r), Decode: s.Decode.draw(r)}
	}
	return reqs, nil
}

// gamma draws from Gamma(k, 1) (Marsaglia and Tsang, 2000; k < 1 through
// Gamma(k+1) * U^(1/k)).
func gamma(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gamma(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
