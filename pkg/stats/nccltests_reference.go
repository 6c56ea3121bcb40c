package stats

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/trace"
)

// Reference is a published bandwidth curve: rows of an nccl-tests table.
type Reference struct {
	Label string
	Path  string
	Rows  []NCCLTestsRow // SizeBytes, TimeUs, AlgbwGBps, BusbwGBps
}

// ReadReference reads a reference CSV of examples/reference/: '#' comment
// lines (a "# label: ..." line names the curve), a header
// size_bytes,time_us,algbw_gbps,busbw_gbps, then one row per size. Errors
// name the file and line.
func ReadReference(path string) (*Reference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, trace.PathError(path, err)
	}
	defer f.Close()
	return ParseReference(f, path)
}

// ParseReference reads a reference CSV from r; path names it in errors
// and gives the default label.
func ParseReference(r io.Reader, path string) (*Reference, error) {
	ref := &Reference{Path: path, Label: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	sc := bufio.NewScanner(r)
	ln, header := 0, false
	want := []string{"size_bytes", "time_us", "algbw_gbps", "busbw_gbps"}
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			if v, ok := strings.CutPrefix(strings.TrimSpace(line[1:]), "label:"); ok {
				ref.Label = strings.TrimSpace(v)
			}
			continue
		}
		fields := strings.Split(line, ",")
		if !header {
			if strings.Join(fields, ",") != strings.Join(want, ",") {
				return nil, fmt.Errorf("%s: line %d: header %q, want %q", path, ln, line, strings.Join(want, ","))
			}
			header = true
			continue
		}
		if len(fields) != len(want) {
			return nil, fmt.Errorf("%s: line %d: %d fields, want %d (%s)", path, ln, len(fields), len(want), strings.Join(want, ","))
		}
		var r NCCLTestsRow
		var v [4]float64
		for i, s := range fields {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return nil, fmt.Errorf("%s: line %d, field %s: %q is not a non-negative number", path, ln, want[i], s)
			}
			v[i] = x
		}
		if v[0] != math.Trunc(v[0]) || v[0] > math.MaxInt64/2 {
			return nil, fmt.Errorf("%s: line %d, field size_bytes: %q is not a whole number of bytes", path, ln, fields[0])
		}
		r.SizeBytes, r.TimeUs, r.AlgbwGBps, r.BusbwGBps = int64(v[0]), v[1], v[2], v[3]
		ref.Rows = append(ref.Rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", path, ln+1, err)
	}
	if len(ref.Rows) == 0 {
		return nil, fmt.Errorf("%s: no rows (want a %s header and rows)", path, strings.Join(want, ","))
	}
	return ref, nil
}
