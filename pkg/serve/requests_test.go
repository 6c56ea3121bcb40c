package serve

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
)

func TestReadRequestsVidur(t *testing.T) {
	in := "arrived_at,num_prefill_tokens,num_decode_tokens,extra\n0.5,100,10,x\n0.25,200,20,y\n"
	reqs, err := ReadRequests("t.csv", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by arrival; ids keep the file's order.
	want := []Request{{ID: 1, Arrival: 250 * des.Millisecond, Prefill: 200, Decode: 20}, {ID: 0, Arrival: 500 * des.Millisecond, Prefill: 100, Decode: 10}}
	if len(reqs) != 2 || reqs[0] != want[0] || reqs[1] != want[1] {
		t.Fatalf("got %+v, want %+v", reqs, want)
	}
}

// The Azure trace slice: the first row at 0, the second 4.314579 s
// later (18:15:46.6805900 to 18:15:50.9951690), tokens as in the file.
func TestReadRequestsAzureSlice(t *testing.T) {
	f, err := os.Open("../../tests/testdata/serve/splitwise_conv_1000.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ReadRequests("slice", f)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1000 {
		t.Fatalf("%d requests, want 1000", len(reqs))
	}
	if reqs[0].Arrival != 0 || reqs[0].Prefill != 374 || reqs[0].Decode != 44 {
		t.Errorf("first: %+v", reqs[0])
	}
	if reqs[1].Arrival != 4314579000*des.Nanosecond || reqs[1].Prefill != 396 || reqs[1].Decode != 109 {
		t.Errorf("second: %+v", reqs[1])
	}
}

func TestReadRequestsBad(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n0,-5,3\n", `b.csv: line 2: column "num_prefill_tokens": -5 tokens is negative`},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,3\n1,5,0\n", `b.csv: line 3: column "num_decode_tokens": 0 tokens`},
		{"arrived_at,num_prefill_tokens\n0,5\n", `b.csv: line 1: missing column "num_decode_tokens"`},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n-1,5,3\n", `b.csv: line 2: column "arrived_at": "-1" is not a time`},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\nNaN,5,3\n", `b.csv: line 2: column "arrived_at"`},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n0,5\n", `b.csv: line 2: column "num_decode_tokens": missing`},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n0,5.5,3\n", `b.csv: line 2: column "num_prefill_tokens": "5.5" is not a whole number`},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,5,3\nyesterday,5,3\n", `b.csv: line 3: column "TIMESTAMP"`},
		{"", "b.csv: empty"},
		{"arrived_at,num_prefill_tokens,num_decode_tokens\n", "b.csv: no requests"},
	} {
		_, err := ReadRequests("b.csv", strings.NewReader(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one line starting %q", c.in, err, c.want)
		}
	}
}

// Poisson gaps have mean 1/rate and CV 1; gamma's the CV asked; fixed
// gaps are exact. 20,000 gaps put the sample mean within 3% (5 standard
// errors of 1/sqrt(n) x CV).
func TestSyntheticArrivals(t *testing.T) {
	for _, c := range []struct {
		proc   string
		cv     float64
		wantCV float64
	}{{"poisson", 0, 1}, {"gamma", 2, 2}, {"gamma", 0.5, 0.5}, {"fixed", 0, 0}} {
		reqs, err := Synthetic{N: 20001, Process: c.proc, Rate: 4, CV: c.cv, Prefill: Lengths{10, 20}, Decode: Lengths{5, 5}, Seed: 7}.Generate()
		if err != nil {
			t.Fatal(err)
		}
		var sum, sq float64
		for i := 1; i < len(reqs); i++ {
			g := (reqs[i].Arrival - reqs[i-1].Arrival).Seconds()
			sum += g
			sq += g * g
			if p := reqs[i].Prefill; p < 10 || p > 20 || reqs[i].Decode != 5 {
				t.Fatalf("%s: lengths %d, %d outside 10-20, 5", c.proc, p, reqs[i].Decode)
			}
		}
		n := float64(len(reqs) - 1)
		mean := sum / n
		cv := math.Sqrt(max(sq/n-mean*mean, 0)) / mean
		if math.Abs(mean-0.25) > 0.25*0.03*max(c.wantCV, 0.1)/0.5 || math.Abs(cv-c.wantCV) > 0.1*max(c.wantCV, 0.1) {
			t.Errorf("%s cv %g: gaps mean %.4f s (want 0.25), cv %.3f (want %g)", c.proc, c.cv, mean, cv, c.wantCV)
		}
	}
	a, _ := Synthetic{N: 50, Process: "gamma", Rate: 3, CV: 3, Prefill: Lengths{1, 9}, Decode: Lengths{1, 9}, Seed: 3}.Generate()
	b, _ := Synthetic{N: 50, Process: "gamma", Rate: 3, CV: 3, Prefill: Lengths{1, 9}, Decode: Lengths{1, 9}, Seed: 3}.Generate()
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed drew different traces")
		}
	}
}

func FuzzReadRequests(f *testing.F) {
	f.Add("arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,100,10\n0.25,200,20\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
	f.Add("arrived_at,num_prefill_tokens,num_decode_tokens\n1e9,16777216,1\n")
	f.Add("\ufeffarrived_at,\"num_prefill_tokens\",num_decode_tokens\n0,5,3\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		reqs, err := ReadRequests("fuzz.csv", strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		for i, q := range reqs {
			if q.Prefill < 1 || q.Decode < 1 || q.Prefill > maxTokens || q.Decode > maxTokens || q.Arrival < 0 {
				t.Fatalf("request %+v accepted", q)
			}
			if i > 0 && q.Arrival < reqs[i-1].Arrival {
				t.Fatal("not in arrival order")
			}
		}
	})
}
