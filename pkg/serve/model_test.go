package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readExample(t *testing.T, name string) Model {
	t.Helper()
	path := filepath.Join("../../examples/models", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadModel(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Parameter counts against the models' published sizes: Llama-3-8B 8.03 B,
// Llama-2-70B 68.98 B, Mixtral-8x7B 46.7 B in all and 12.9 B active per
// token (Mistral's announcement). The weights Iteration reads for one
// token (Mixtral: its top-2 experts) hold the active count; the whole
// model adds the input embedding, which Iteration does not read.
func TestModelParams(t *testing.T) {
	for _, c := range []struct {
		file           string
		total, active  float64 // billions
		kvBytesPerTokn int64
	}{
		{"llama-3-8b.json", 8.03, 8.03, 2 * 8 * 128 * 32 * 2},
		{"llama-2-70b.json", 68.98, 68.98, 2 * 8 * 128 * 80 * 2},
		{"mixtral-8x7b.json", 46.7, 12.9, 2 * 8 * 128 * 32 * 2},
	} {
		m := readExample(t, c.file)
		embed := float64(m.Vocab * m.Hidden)
		experts := float64(max(m.Experts, 1))
		total := float64(m.Layers)*(m.attnParams()+experts*m.expertParams()) + 2*embed
		active := m.Iteration(1, 0, 0, 0).Bytes/float64(m.DTypeBytes) - float64(m.KVBytesPerToken())/float64(m.DTypeBytes) + embed
		// Norm weights (a few per layer) are left out: within 0.5%.
		if d := total/1e9/c.total - 1; d < -0.005 || d > 0.005 {
			t.Errorf("%s: %.3f B parameters, want %.2f B", c.file, total/1e9, c.total)
		}
		if c.active != c.total {
			if d := active/1e9/c.active - 1; d < -0.01 || d > 0.01 {
				t.Errorf("%s: %.3f B active, want %.1f B", c.file, active/1e9, c.active)
			}
		}
		if got := m.KVBytesPerToken(); got != c.kvBytesPerTokn {
			t.Errorf("%s: KV %d bytes a token, want %d", c.file, got, c.kvBytesPerTokn)
		}
	}
	// The formula: 2 x (1023 + 1) x 8 x 128 x 32 x 2 = 128 MiB.
	if m := readExample(t, "llama-3-8b.json"); m.KVBytes(1023) != 128<<20 {
		t.Errorf("KV of 1023 tokens: %d bytes, want 128 MiB", m.KVBytes(1023))
	}
}

func TestReadModelBad(t *testing.T) {
	good := `{"layers":32,"hidden":4096,"heads":32,"kv_heads":8,"head_dim":128,"intermediate":14336,"vocab":32000,"dtype_bytes":2`
	for _, c := range []struct{ in, want string }{
		{good + `,"layer_norm":1}`, `m.json: unknown key "layer_norm"`},
		{strings.Replace(good, `"vocab":32000,`, "", 1) + "}", `m.json: key "vocab": missing or 0`},
		{strings.Replace(good, `"layers":32`, `"layers":-2`, 1) + "}", `m.json: key "layers": -2 is outside`},
		{strings.Replace(good, `"layers":32`, `"layers":"32"`, 1) + "}", `m.json: key "layers": want int64`},
		{good + `,"experts":8}`, `m.json: key "top_k"`},
		{strings.Replace(good, `"kv_heads":8`, `"kv_heads":7`, 1) + "}", `m.json: key "kv_heads": 7 does not divide`},
		{good, `m.json: `},
	} {
		_, err := ReadModel("m.json", strings.NewReader(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line starting %q", c.in, err, c.want)
		}
	}
}

func TestParseReplicas(t *testing.T) {
	s, err := ParseReplicas("3:tp=8,pp=2,ep=4")
	if err != nil || s != (ReplicaSpec{3, 8, 2, 4}) || s.GPUs() != 16 {
		t.Fatalf("got %+v, %v", s, err)
	}
	if s, _ := ParseReplicas("2"); s != (ReplicaSpec{2, 1, 1, 1}) {
		t.Errorf("2: %+v", s)
	}
	if s, _ := ParseReplicas("0"); s.Count != 0 {
		t.Errorf("0: %+v", s)
	}
	for _, bad := range []string{"", "-1", "x:tp=2", "1:tp=0", "1:dp=2", "1:tp=4,ep=3", "1:tp"} {
		if _, err := ParseReplicas(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzReadModel(f *testing.F) {
	for _, name := range []string{"llama-3-8b.json", "mixtral-8x7b.json"} {
		b, err := os.ReadFile(filepath.Join("../../examples/models", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`{"layers":1e400}`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ReadModel("fuzz.json", strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		if m.check() != nil || m.KVBytesPerToken() <= 0 {
			t.Fatalf("model %+v accepted", m)
		}
		w := m.Iteration(16, 136, 100, 1)
		if !(w.FLOPs > 0) || !(w.Bytes > 0) {
			t.Fatalf("model %+v: work %+v", m, w)
		}
	})
}

func FuzzParseReplicas(f *testing.F) {
	f.Add("4:tp=8,pp=2,ep=4")
	f.Add("0")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseReplicas(in)
		if err != nil {
			return
		}
		if s.Count < 0 || s.TP < 1 || s.PP < 1 || s.EP < 1 || s.TP%s.EP != 0 {
			t.Fatalf("%q gave %+v", in, s)
		}
	})
}
