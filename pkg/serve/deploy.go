package serve

import (
	"fmt"
	"strconv"
	"strings"
)

// ReplicaSpec is a group of identical replicas: Count replicas of TP x PP
// GPUs each, the MoE layers' experts spread over EP of each stage's TP
// ranks.
type ReplicaSpec struct {
	Count, TP, PP, EP int
}

// GPUs is the GPUs one replica takes.
func (s ReplicaSpec) GPUs() int { return s.TP * s.PP }

// String renders the spec as ParseReplicas reads it.
func (s ReplicaSpec) String() string {
	return fmt.Sprintf("%d:tp=%d,pp=%d,ep=%d", s.Count, s.TP, s.PP, s.EP)
}

// ParseReplicas reads COUNT[:tp=N][,pp=N][,ep=N] (each 1 by default), e.g.
// 4:tp=2 or 2:tp=8,ep=8. COUNT may be 0 (no decode replicas: colocated
// serving).
func ParseReplicas(s string) (ReplicaSpec, error) {
	spec := ReplicaSpec{TP: 1, PP: 1, EP: 1}
	count, opts, _ := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 || n > 1<<16 {
		return spec, fmt.Errorf("%q: want COUNT[:tp=N][,pp=N][,ep=N] with COUNT from 0 to 65536", s)
	}
	spec.Count = n
	if opts != "" {
		for _, kv := range strings.Split(opts, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 || x > 4096 {
				return spec, fmt.Errorf("%q: %q: want tp=N, pp=N or ep=N with N from 1 to 4096", s, kv)
			}
			switch k {
			case "tp":
				spec.TP = x
			case "pp":
				spec.PP = x
			case "ep":
				spec.EP = x
			default:
				return spec, fmt.Errorf("%q: unknown key %q (tp, pp, ep)", s, k)
			}
		}
	}
	if spec.TP%spec.EP != 0 {
		return spec, fmt.Errorf("%q: ep=%d does not divide tp=%d (experts are spread over a stage's TP ranks)", s, spec.EP, spec.TP)
	}
	return spec, nil
}

// check refuses a deployment the model cannot take.
func (s ReplicaSpec) check(what string, m *Model) error {
	if s.Count < 0 || s.TP < 1 || s.PP < 1 || s.EP < 1 || s.TP%s.EP != 0 {
		return fmt.Errorf("--%s %s: want a count from 0, tp, pp and ep from 1, ep dividing tp", what, s)
	}
	if m.Layers%int64(s.PP) != 0 {
		return fmt.Errorf("--%s %s: pp=%d does not divide the model's %d layers", what, s, s.PP, m.Layers)
	}
	if s.EP > 1 && !m.moe() {
		return fmt.Errorf("--%s %s: ep=%d but %s has no experts", what, s, s.EP, m.Name)
	}
	if s.EP > 1 && m.Experts%int64(s.EP) != 0 {
		return fmt.Errorf("--%s %s: ep=%d does not divide the model's %d experts", what, s, s.EP, m.Experts)
	}
	return nil
}
