package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Model is a transformer's shape: what its FLOPs, weight bytes and KV
// cache follow from. The keys are those of examples/models/*.json, taken
// from the models' public Hugging Face config.json files.
type Model struct {
	Name         string `json:"name"`
	Source       string `json:"source"`       // where the numbers come from (not used)
	Layers       int64  `json:"layers"`       // num_hidden_layers
	Hidden       int64  `json:"hidden"`       // hidden_size
	Heads        int64  `json:"heads"`        // num_attention_heads
	KVHeads      int64  `json:"kv_heads"`     // num_key_value_heads
	HeadDim      int64  `json:"head_dim"`     // hidden_size / heads unless the config says
	Intermediate int64  `json:"intermediate"` // intermediate_size (of one expert for MoE)
	Vocab        int64  `json:"vocab"`        // vocab_size
	Experts      int64  `json:"experts"`      // num_local_experts; 0 for a dense model
	TopK         int64  `json:"top_k"`        // num_experts_per_tok
	DTypeBytes   int64  `json:"dtype_bytes"`  // bytes per weight, activation and KV element (2: bf16)
}

// ReadModel reads a model description (JSON), called name in errors. An
// unknown key, a missing one, or a count out of range is refused with one
// line naming the key.
func ReadModel(name string, r io.Reader) (Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return Model{}, fmt.Errorf("%s: %v", name, err)
	}
	var m Model
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return Model{}, fmt.Errorf("%s: byte %d: not valid JSON: %v", name, se.Offset, se)
		case errors.As(err, &te):
			return Model{}, fmt.Errorf("%s: key %q: want %s, found %s", name, te.Field, te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return Model{}, fmt.Errorf("%s: unknown key %s (keys: name, source, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, experts, top_k, dtype_bytes)",
				name, strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return Model{}, fmt.Errorf("%s: %v", name, err)
	}
	if dec.More() {
		return Model{}, fmt.Errorf("%s: more than one JSON value", name)
	}
	if err := m.check(); err != nil {
		return Model{}, fmt.Errorf("%s: %v", name, err)
	}
	if m.Name == "" {
		m.Name = strings.TrimSuffix(name, ".json")
	}
	return m, nil
}

func (m *Model) check() error {
	const big = 1 << 20
	for _, f := range []struct {
		key    string
		v      int64
		lo, hi int64
	}{
		{"layers", m.Layers, 1, 4096}, {"hidden", m.Hidden, 1, big}, {"heads", m.Heads, 1, 4096},
		{"kv_heads", m.KVHeads, 1, 4096}, {"head_dim", m.HeadDim, 1, 65536},
		{"intermediate", m.Intermediate, 1, big}, {"vocab", m.Vocab, 1, 1 << 24},
		{"experts", m.Experts, 0, 4096}, {"top_k", m.TopK, 0, 4096}, {"dtype_bytes", m.DTypeBytes, 1, 8},
	} {
		if f.v < f.lo || f.v > f.hi {
			if f.v == 0 {
				return fmt.Errorf("key %q: missing or 0 (want %d to %d)", f.key, f.lo, f.hi)
			}
			return fmt.Errorf("key %q: %d is outside %d to %d", f.key, f.v, f.lo, f.hi)
		}
	}
	if m.KVHeads > m.Heads || m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("key %q: %d does not divide heads %d", "kv_heads", m.KVHeads, m.Heads)
	}
	if m.Experts > 0 && (m.TopK < 1 || m.TopK > m.Experts) {
		return fmt.Errorf("key %q: %d; a model of %d experts routes each token to 1 to %d of them", "top_k", m.TopK, m.Experts, m.Experts)
	}
	if m.Experts == 0 && m.TopK != 0 {
		return fmt.Errorf("key %q: %d without experts", "top_k", m.TopK)
	}
	return nil
}

// KVBytesPerToken is the K and V cache one token leaves in every layer.
func (m *Model) KVBytesPerToken() int64 {
	return 2 * m.KVHeads * m.HeadDim * m.Layers * m.DTypeBytes
}

// KVBytes is the cache moved from prefill to decode for a prompt of p
// tokens: 2 x (p + 1) x kv_heads x head_dim x layers x dtype bytes (the
// prompt and the first output token, which prefill produced).
func (m *Model) KVBytes(p int64) int64 { return (p + 1) * m.KVBytesPerToken() }

// attnParams are one layer's attention weights: Q and O of heads x
// head_dim, K and V of kv_heads x head_dim, each against hidden.
func (m *Model) attnParams() float64 {
	return float64(m.Hidden) * float64(2*m.Heads*m.HeadDim+2*m.KVHeads*m.HeadDim)
}

// expertParams are one MLP's weights (gate, up and down: SwiGLU).
func (m *Model) expertParams() float64 { return 3 * float64(m.Hidden) * float64(m.Intermediate) }

// moe tells whether the MLPs are experts.
func (m *Model) moe() bool { return m.Experts > 0 }

// Work is what one forward iteration costs: floating-point operations and
// bytes read from or written to HBM, over the whole replica.
type Work struct {
	FLOPs float64
	Bytes float64
}

// Iteration is the work of one forward pass over newTokens tokens, with
// attended the sum over those tokens of the context each attends to
// (prefill of p tokens: p(p+1)/2 causal; a decode token of context c: c),
// ctxTokens the KV cache entries read, seqs the sequences (each samples one
// token from the LM head). Weights are read once per iteration; an MoE
// layer reads the experts its tokens can reach, min(experts, tokens x
// top_k).
func (m *Model) Iteration(newTokens, attended, ctxTokens, seqs int64) Work {
	t := float64(newTokens)
	L := float64(m.Layers)
	mlpPerToken := m.expertParams()
	expertsRead := 1.0
	if m.moe() {
		mlpPerToken *= float64(m.TopK)
		expertsRead = float64(min(m.Experts, newTokens*m.TopK))
	}
	dense := L * (m.attnParams() + mlpPerToken)
	flops := 2*t*dense + 2*float64(seqs)*float64(m.Hidden)*float64(m.Vocab)
	// QK^T and PV: 2 matmuls of heads x head_dim per attended pair.
	flops += 4 * L * float64(m.Heads*m.HeadDim) * float64(attended)
	weights := L*(m.attnParams()+expertsRead*m.expertParams()) + float64(m.Hidden)*float64(m.Vocab)
	b := float64(m.DTypeBytes) * weights
	b += float64(ctxTokens) * float64(m.KVBytesPerToken()) // KV read
	b += float64(newTokens) * float64(m.KVBytesPerToken()) // KV written
	return Work{FLOPs: flops, Bytes: b}
}
