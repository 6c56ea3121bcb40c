package serve

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A compute table gives measured times of a transformer layer's operations
// on one GPU (one tensor-parallel worker), by the number of tokens in the
// batch, in one of two CSV layouts (formats/compute-table.md):
//
//   - Vidur's profiling layout (data/profiling/compute/<gpu>/<model>/mlp.csv):
//     a row per profiled batch, columns num_tokens, optional
//     num_tensor_parallel_workers and the model's n_head, n_kv_head, n_embd,
//     n_expanded_embd, and per operation time_stats.<op>.median (or .mean),
//     milliseconds;
//   - a long layout: columns operation, num_tokens, time_ms, optional
//     num_tensor_parallel_workers.

// Operations a table may give. The four GEMMs carry the work the roofline
// models otherwise (each replaced by the table when present); the others
// are elementwise kernels the roofline leaves out, added when present.
// Times are per layer, except emb, once per iteration.
var (
	gemmOps  = []string{"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"}
	otherOps = []string{"emb", "input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add"}
)

// ComputeTable holds a table's times per tensor-parallel degree (0 when
// the table has no num_tensor_parallel_workers column: for every degree).
type ComputeTable struct {
	Name  string
	byTP  map[int]map[string][]point
	shape map[string]int64 // model shape columns the table names
}

type point struct {
	tokens float64
	sec    float64
}

// shapeColumns are Vidur's model columns and the Model field each must
// equal (vocab_size is left out: Vidur pads it).
var shapeColumns = []string{"n_head", "n_kv_head", "n_embd", "n_expanded_embd"}

func (m *Model) shapeValue(col string) int64 {
	switch col {
	case "n_head":
		return m.Heads
	case "n_kv_head":
		return m.KVHeads
	case "n_embd":
		return m.Hidden
	}
	return m.Intermediate
}

// ReadComputeTable reads a compute table (CSV), called name in errors.
// A bad header or cell is refused with one line naming the line and
// column; rows of the same operation and token count (Vidur's files repeat
// some) are averaged.
func ReadComputeTable(name string, r io.Reader) (*ComputeTable, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file: want a CSV header (num_tokens and time_stats.<op>.median columns, or operation,num_tokens,time_ms)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, csvErr(err))
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("%s: line 1: column %q twice", name, h)
		}
		col[h] = i
	}
	t := &ComputeTable{Name: name, byTP: map[int]map[string][]point{}, shape: map[string]int64{}}
	// cells maps an operation to its time column (wide layout).
	cells := map[string]int{}
	_, long := col["operation"]
	if long {
		for _, need := range []string{"num_tokens", "time_ms"} {
			if _, ok := col[need]; !ok {
				return nil, fmt.Errorf("%s: line 1: no column %q (the long layout is operation,num_tokens,time_ms)", name, need)
			}
		}
	} else {
		if _, ok := col["num_tokens"]; !ok {
			return nil, fmt.Errorf("%s: line 1: no column \"num_tokens\" (want Vidur's mlp.csv layout or operation,num_tokens,time_ms)", name)
		}
		for h, i := range col {
			op, ok := strings.CutPrefix(h, "time_stats.")
			if !ok {
				continue
			}
			op, stat, _ := strings.Cut(op, ".")
			if stat != "median" && stat != "mean" {
				continue
			}
			if _, have := cells[op]; have && stat == "mean" {
				continue // the median wins
			}
			cells[op] = i
		}
		if len(cells) == 0 {
			return nil, fmt.Errorf("%s: line 1: no time_stats.<op>.median or .mean column", name)
		}
		for op := range cells {
			if !knownOp(op) {
				return nil, fmt.Errorf("%s: line 1: unknown operation %q in column time_stats.%s (known: %s)", name, op, op, strings.Join(append(slices.Clone(gemmOps), otherOps...), ", "))
			}
		}
	}
	type key struct {
		tp     int
		op     string
		tokens float64
	}
	sum := map[key][2]float64{} // time total, rows
	line := 1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, csvErr(err))
		}
		cell := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
		num := func(c string, lo, hi float64) (float64, error) {
			v, err := strconv.ParseFloat(cell(c), 64)
			if err != nil || !(v >= lo && v <= hi) {
				return 0, fmt.Errorf("%s: line %d: column %q: %q is not a number from %g to %g", name, line, c, cell(c), lo, hi)
			}
			return v, nil
		}
		tokens, err := num("num_tokens", 1, maxTokens)
		if err != nil {
			return nil, err
		}
		if tokens != math.Trunc(tokens) {
			return nil, fmt.Errorf("%s: line %d: column %q: %q is not a whole number", name, line, "num_tokens", cell("num_tokens"))
		}
		tp := 0
		if _, ok := col["num_tensor_parallel_workers"]; ok {
			v, err := num("num_tensor_parallel_workers", 1, 4096)
			if err != nil || v != math.Trunc(v) {
				return nil, fmt.Errorf("%s: line %d: column %q: %q is not a whole number from 1 to 4096", name, line, "num_tensor_parallel_workers", cell("num_tensor_parallel_workers"))
			}
			tp = int(v)
		}
		for _, c := range shapeColumns {
			if _, ok := col[c]; !ok {
				continue
			}
			v, err := num(c, 1, 1<<24)
			if err != nil {
				return nil, err
			}
			if old, ok := t.shape[c]; ok && old != int64(v) {
				return nil, fmt.Errorf("%s: line %d: column %q: %d, earlier rows %d: one model per table", name, line, c, int64(v), old)
			}
			t.shape[c] = int64(v)
		}
		add := func(op, c string) error {
			ms, err := num(c, 0, 1e7)
			if err != nil {
				return err
			}
			k := key{tp, op, tokens}
			s := sum[k]
			sum[k] = [2]float64{s[0] + ms/1e3, s[1] + 1}
			return nil
		}
		if long {
			op := cell("operation")
			if !knownOp(op) {
				return nil, fmt.Errorf("%s: line %d: column \"operation\": unknown operation %q (known: %s)", name, line, op, strings.Join(append(slices.Clone(gemmOps), otherOps...), ", "))
			}
			if err := add(op, "time_ms"); err != nil {
				return nil, err
			}
			continue
		}
		for _, op := range slices.Sorted(maps.Keys(cells)) {
			if err := add(op, header[cells[op]]); err != nil {
				return nil, err
			}
		}
	}
	if len(sum) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	for k, s := range sum {
		if t.byTP[k.tp] == nil {
			t.byTP[k.tp] = map[string][]point{}
		}
		t.byTP[k.tp][k.op] = append(t.byTP[k.tp][k.op], point{k.tokens, s[0] / s[1]})
	}
	for _, ops := range t.byTP {
		for _, pts := range ops {
			slices.SortFunc(pts, func(a, b point) int { return int(math.Copysign(1, a.tokens-b.tokens)) })
		}
	}
	return t, nil
}

func knownOp(op string) bool { return slices.Contains(gemmOps, op) || slices.Contains(otherOps, op) }

// layerTable is a table's operations for one replica's TP degree.
type layerTable map[string][]point

// forReplica returns the table's operations for tensor parallelism tp,
// checking the table's model columns against m. An MoE model's MLP is not
// a dense GEMM: its mlp_up_proj and mlp_down_proj rows are refused.
func (t *ComputeTable) forReplica(m *Model, tp int) (layerTable, error) {
	for _, c := range shapeColumns {
		if v, ok := t.shape[c]; ok && v != m.shapeValue(c) {
			return nil, fmt.Errorf("%s: column %q is %d, the model %s has %d: a table of another model", t.Name, c, v, m.Name, m.shapeValue(c))
		}
	}
	ops, ok := t.byTP[tp]
	if !ok {
		ops, ok = t.byTP[0]
	}
	if !ok {
		return nil, fmt.Errorf("%s: no rows for num_tensor_parallel_workers %d (the table has %s)", t.Name, tp, tpList(t.byTP))
	}
	if m.moe() {
		for _, op := range []string{"mlp_up_proj", "mlp_down_proj"} {
			if _, ok := ops[op]; ok {
				return nil, fmt.Errorf("%s: operation %s for %s, a mixture of experts: the table's MLP is a dense one (drop its MLP rows to use the roofline for the experts)", t.Name, op, m.Name)
			}
		}
	}
	return layerTable(ops), nil
}

func tpList(m map[int]map[string][]point) string {
	var s []string
	for _, tp := range slices.Sorted(maps.Keys(m)) {
		s = append(s, strconv.Itoa(tp))
	}
	return strings.Join(s, ", ")
}

// Roofline lists what the roofline prices for a replica of tensor
// parallelism tp with this table: the GEMMs the table lacks, and always
// attention with the KV cache and the LM head (a layer table has neither).
func (t *ComputeTable) Roofline(m *Model, tp int) ([]string, error) {
	lt, err := t.forReplica(m, tp)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, op := range gemmOps {
		if _, ok := lt[op]; !ok {
			out = append(out, op)
		}
	}
	return append(out, "attention and the KV cache", "the LM head"), nil
}

// at is an operation's time for tokens tokens: linear between the rows
// around it; below the first row, the first row's time (a kernel gets no
// faster than at its smallest measured size); above the last, the line
// through the last two rows (proportional to tokens from a single row),
// never below the last row's time.
func at(pts []point, tokens float64) float64 {
	first, last := pts[0], pts[len(pts)-1]
	if tokens <= first.tokens {
		return first.sec
	}
	if tokens >= last.tokens {
		if len(pts) == 1 {
			return last.sec * tokens / last.tokens
		}
		p := pts[len(pts)-2]
		return max(last.sec, last.sec+(tokens-last.tokens)*(last.sec-p.sec)/(last.tokens-p.tokens))
	}
	i, _ := slices.BinarySearchFunc(pts, tokens, func(p point, x float64) int { return int(math.Copysign(1, p.tokens-x)) })
	if pts[i].tokens == tokens {
		return pts[i].sec
	}
	a, b := pts[i-1], pts[i]
	return a.sec + (tokens-a.tokens)*(b.sec-a.sec)/(b.tokens-a.tokens)
}

// gemmWork is the work of GEMM op over all layers for tokens tokens, over
// the whole replica (the share Model.Iteration counts for it).
func (m *Model) gemmWork(op string, tokens int64) Work {
	L, h, hd := float64(m.Layers), float64(m.Hidden), float64(m.HeadDim)
	var params float64
	switch op {
	case "attn_pre_proj":
		params = h * float64(m.Heads+2*m.KVHeads) * hd
	case "attn_post_proj":
		params = h * float64(m.Heads) * hd
	case "mlp_up_proj":
		params = 2 * h * float64(m.Intermediate)
	case "mlp_down_proj":
		params = h * float64(m.Intermediate)
	}
	return Work{FLOPs: 2 * float64(tokens) * L * params, Bytes: float64(m.DTypeBytes) * L * params}
}

// tableSeconds is an iteration's compute with a table: the table's
// operations for newTokens tokens (per layer x layers; emb once), plus the
// roofline of the work the table does not cover (attention, the KV cache,
// the LM head and the GEMMs it lacks) on tp GPUs.
func tableSeconds(lt layerTable, r Roofline, m *Model, w Work, newTokens int64, tp int) float64 {
	x := float64(newTokens)
	var sec float64
	for _, op := range gemmOps {
		if pts, ok := lt[op]; ok {
			sec += float64(m.Layers) * at(pts, x)
			g := m.gemmWork(op, newTokens)
			w.FLOPs -= g.FLOPs
			w.Bytes -= g.Bytes
		}
	}
	for _, op := range otherOps {
		if pts, ok := lt[op]; ok {
			n := float64(m.Layers)
			if op == "emb" {
				n = 1
			}
			sec += n * at(pts, x)
		}
	}
	return sec + iterationSeconds(r, Work{FLOPs: max(w.FLOPs, 0), Bytes: max(w.Bytes, 0)}, tp)
}
