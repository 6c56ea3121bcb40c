package serve

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/roofline"
)

func readTable(t *testing.T, body string) *ComputeTable {
	t.Helper()
	tab, err := ReadComputeTable("t.csv", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// Interpolation by hand: rows at 1 and 9 tokens of 1 and 5 ms.
func TestComputeTableInterpolation(t *testing.T) {
	pts := []point{{1, 1e-3}, {9, 5e-3}}
	for _, c := range []struct{ tokens, want float64 }{
		{1, 1e-3}, {0.5, 1e-3}, // below the first row: its time
		{5, 3e-3}, {9, 5e-3}, // between: linear
		{13, 7e-3}, // above the last: the line through the last two, extended
	} {
		if got := at(pts, c.tokens); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("at %g tokens: %g s, want %g", c.tokens, got, c.want)
		}
	}
	if got := at([]point{{4, 2e-3}}, 6); math.Abs(got-3e-3) > 1e-15 {
		t.Errorf("one row, 6 tokens: %g s, want 3e-3 (proportional)", got)
	}
	// A falling tail (noise) never takes the time below the last row.
	if got := at([]point{{1, 2e-3}, {2, 1e-3}}, 10); got != 1e-3 {
		t.Errorf("falling tail: %g s, want 1e-3", got)
	}
}

// Vidur's layout: the median column wins over the mean, repeated rows of
// one token count are averaged, the TP column selects rows.
func TestComputeTableVidurLayout(t *testing.T) {
	tab := readTable(t, "time_stats.mlp_up_proj.mean,time_stats.mlp_up_proj.median,time_stats.add.std,num_tokens,num_tensor_parallel_workers,n_head\n"+
		"9,1.0,0,8,1,32\n9,2.0,0,8,2,32\n9,3.0,0,8,2,32\n")
	m := Model{Name: "m", Heads: 32, Layers: 1}
	for _, c := range []struct {
		tp   int
		want float64
	}{{1, 1e-3}, {2, 2.5e-3}} {
		lt, err := tab.forReplica(&m, c.tp)
		if err != nil {
			t.Fatal(err)
		}
		if got := at(lt["mlp_up_proj"], 8); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("tp %d: %g s, want %g", c.tp, got, c.want)
		}
		if len(lt) != 1 {
			t.Errorf("tp %d: operations %v, want mlp_up_proj alone (std is no time)", c.tp, lt)
		}
	}
	if _, err := tab.forReplica(&m, 4); err == nil || !strings.Contains(err.Error(), "no rows for num_tensor_parallel_workers 4 (the table has 1, 2)") {
		t.Errorf("tp 4: %v", err)
	}
	if _, err := tab.forReplica(&Model{Name: "other", Heads: 64}, 1); err == nil || !strings.Contains(err.Error(), `column "n_head" is 32, the model other has 64`) {
		t.Errorf("another model: %v", err)
	}
	moe := Model{Name: "moe", Heads: 32, Experts: 8, TopK: 2}
	if _, err := tab.forReplica(&moe, 1); err == nil || !strings.Contains(err.Error(), "mixture of experts") {
		t.Errorf("MoE: %v", err)
	}
}

func TestComputeTableBad(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty file"},
		{"a,b\n1,2\n", `line 1: no column "num_tokens"`},
		{"num_tokens,time_stats.attn.median\n1,2\n", `unknown operation "attn"`},
		{"num_tokens,time_stats.add.std\n1,2\n", "no time_stats.<op>.median or .mean column"},
		{"num_tokens,time_stats.add.median\n1,2\n0,2\n", `line 3: column "num_tokens": "0" is not a number from 1`},
		{"num_tokens,time_stats.add.median\n1.5,2\n", `line 2: column "num_tokens": "1.5" is not a whole number`},
		{"num_tokens,time_stats.add.median\n1,-2\n", `line 2: column "time_stats.add.median": "-2"`},
		{"num_tokens,time_stats.add.median\n1,NaN\n", `line 2: column "time_stats.add.median": "NaN"`},
		{"operation,num_tokens\nadd,1\n", `no column "time_ms"`},
		{"operation,num_tokens,time_ms\nsoftmax,1,2\n", `line 2: column "operation": unknown operation "softmax"`},
		{"operation,num_tokens,time_ms\nadd,1,2,3\n", "line 2: wrong number of fields"},
		{"operation,num_tokens,time_ms\n", "no rows"},
		{"num_tokens,n_embd,time_stats.add.median\n1,4096,1\n2,8192,1\n", `line 3: column "n_embd": 8192, earlier rows 4096`},
		{"operation,num_tokens,time_ms,num_tensor_parallel_workers\nadd,1,2,0\n", `column "num_tensor_parallel_workers"`},
	} {
		_, err := ReadComputeTable("t.csv", strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.csv: ") {
			t.Errorf("%q: error %v, want one naming the file and %q", c.in, err, c.want)
		}
	}
}

// One 100-token prompt of Llama-3-8B (32 layers, hidden 4096, 32 heads of
// 128, 8 KV heads, vocab 128256, bf16) on one H100 with a table of the
// four GEMMs and emb at 64 and 128 tokens: 100 tokens lie 36/64 = 0.5625
// of the way, so per layer pre 0.2 -> 0.3125, post 0.1, up 1.45, down
// 0.725 ms, 2.5875 ms x 32 layers = 82.8 ms, and emb 0.02125 ms once.
// The roofline prices the rest: the LM head for one sequence, 2 x 4096 x
// 128256 FLOPs and as many bytes of weights, and attention over 100 x 101
// / 2 = 5050 attended pairs, 4 x 32 layers x 4096 x 5050 FLOPs, and 100
// tokens of KV cache written, 100 x 131072 bytes: memory-bound,
// 1,063,780,352 B / 3.35 TB/s = 317.546 us. TTFT = 83.1388 ms.
func TestServeComputeTable(t *testing.T) {
	tab := readTable(t, "operation,num_tokens,time_ms\n"+
		"attn_pre_proj,64,0.2\nattn_pre_proj,128,0.4\nattn_post_proj,64,0.1\nattn_post_proj,128,0.1\n"+
		"mlp_up_proj,128,1.8\nmlp_up_proj,64,1.0\nmlp_down_proj,64,0.5\nmlp_down_proj,128,0.9\nemb,64,0.01\nemb,128,0.03\n")
	rows := serveRun(t, Config{Table: tab}, []Request{{Prefill: 100, Decode: 1}})
	flops := 2*4096*128256.0 + 4*32*4096*5050.0
	bytes := 2*4096*128256.0 + 100*131072.0
	h100 := roofline.ByGPU["H100"]
	rest := max(flops/h100.PeakFLOPs, bytes/h100.HBMBps)
	want := des.FromSeconds(32*(0.3125+0.1+1.45+0.725)*1e-3 + 0.02125e-3 + rest).Ns()
	if got := rows[0].TTFTNs; got < want-1 || got > want+1 {
		t.Errorf("TTFT %d ns, want %d (table 82.82125 ms + roofline %.3f us)", got, want, rest*1e6)
	}
	// Without the GEMMs the table leaves all the work to the roofline:
	// emb alone adds its time to the roofline's.
	embOnly := readTable(t, "operation,num_tokens,time_ms\nemb,64,0.01\nemb,128,0.03\n")
	plain := serveRun(t, Config{}, []Request{{Prefill: 100, Decode: 1}})
	with := serveRun(t, Config{Table: embOnly}, []Request{{Prefill: 100, Decode: 1}})
	if d := with[0].TTFTNs - plain[0].TTFTNs; d < 21250-1 || d > 21250+1 {
		t.Errorf("emb alone adds %d ns, want 21250", d)
	}
}

// The example table reads, is Llama-2-70B's (its model columns agree) and
// covers the four GEMMs at TP 4 and 8.
func TestComputeTableExample(t *testing.T) {
	f, err := os.Open("../../examples/compute/vidur-h100-llama-2-70b.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := ReadComputeTable("vidur-h100-llama-2-70b.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	m := readExample(t, "llama-2-70b.json")
	for _, tp := range []int{4, 8} {
		rest, err := tab.Roofline(&m, tp)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != 2 {
			t.Errorf("tp %d: the roofline prices %v, want attention and the LM head alone", tp, rest)
		}
	}
}

func FuzzReadComputeTable(f *testing.F) {
	f.Add("operation,num_tokens,time_ms\nadd,1,2\nadd,4,3\n")
	f.Add("time_stats.mlp_up_proj.median,num_tokens,num_tensor_parallel_workers,n_head\n1.0,8,1,32\n")
	f.Add("num_tokens,time_stats.emb.mean\n1,\"2\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		tab, err := ReadComputeTable("f.csv", strings.NewReader(in))
		if err != nil {
			return
		}
		for _, ops := range tab.byTP {
			for op, pts := range ops {
				for _, x := range []float64{1, 3, 1e6} {
					if v := at(pts, x); !(v >= 0) || math.IsInf(v, 0) {
						t.Fatalf("%s at %g tokens: %g", op, x, v)
					}
				}
			}
		}
	})
}
