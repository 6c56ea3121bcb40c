package chakra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// RankFile is rank r's file of a trace prefix: PREFIX.r.et, as ASTRA-sim
// names them.
func RankFile(prefix string, r int) string { return fmt.Sprintf("%s.%d.et", prefix, r) }

// ReadPrefix reads PREFIX.0.et, PREFIX.1.et, ... up to the first rank
// with no file; rank 0's must exist.
func ReadPrefix(prefix string) ([]*Trace, error) {
	var out []*Trace
	for r := 0; ; r++ {
		name := RankFile(prefix, r)
		if _, err := os.Stat(name); err != nil {
			if r == 0 {
				return nil, fmt.Errorf("%s: no Chakra trace for rank 0 (files are PREFIX.<rank>.et): %v", name, errors.Unwrap(err))
			}
			return out, nil
		}
		t, err := ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
}

// Groups are ASTRA-sim's communicator groups (--comm-group-configuration):
// a JSON object from a group's name, which a node's pg_name gives, to its
// ranks.
type Groups struct {
	File  string
	Names []string  // in numeric order where the names are numbers, then by name
	Ranks [][]int32 // Ranks[i] belongs to Names[i]
	index map[string]int
}

// ReadGroups reads a group file, checking each rank is below world.
func ReadGroups(r io.Reader, file string, world int) (*Groups, error) {
	var raw map[string][]int64
	dec := json.NewDecoder(r)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object of rank lists ({\"1\":[0,1,2,3],...}): %v", file, err)
	}
	g := &Groups{File: file, index: map[string]int{}}
	for name := range raw {
		g.Names = append(g.Names, name)
	}
	slices.SortFunc(g.Names, func(a, b string) int {
		ai, ea := strconv.ParseInt(a, 10, 64)
		bi, eb := strconv.ParseInt(b, 10, 64)
		switch {
		case ea == nil && eb == nil:
			return int(min(max(ai-bi, -1), 1))
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	for i, name := range g.Names {
		ranks := raw[name]
		if len(ranks) == 0 {
			return nil, fmt.Errorf("%s: group %q: no ranks", file, name)
		}
		seen := map[int64]bool{}
		rs := make([]int32, len(ranks))
		for j, r := range ranks {
			if r < 0 || r >= int64(world) {
				return nil, fmt.Errorf("%s: group %q, ranks[%d]: rank %d is not one of the %d ranks with a trace", file, name, j, r, world)
			}
			if seen[r] {
				return nil, fmt.Errorf("%s: group %q, ranks[%d]: rank %d twice", file, name, j, r)
			}
			seen[r] = true
			rs[j] = int32(r)
		}
		g.Ranks = append(g.Ranks, rs)
		g.index[name] = i
	}
	return g, nil
}

// Lookup is a group's index in Names, or false.
func (g *Groups) Lookup(name string) (int, bool) {
	if g == nil {
		return 0, false
	}
	i, ok := g.index[name]
	return i, ok
}

// WriteGroups writes groups in ASTRA-sim's format, names[i] to ranks[i].
func WriteGroups(w io.Writer, names []string, ranks [][]int32) error {
	if _, err := io.WriteString(w, "{"); err != nil {
		return err
	}
	for i, n := range names {
		sep := ",\n "
		if i == 0 {
			sep = "\n "
		}
		k, _ := json.Marshal(n)
		v, _ := json.Marshal(ranks[i])
		if _, err := fmt.Fprintf(w, "%s%s: %s", sep, k, v); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n}\n")
	return err
}
