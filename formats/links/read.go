package links

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/formats/internal/pqcheck"
)

// maxRows bounds the rows a file may announce (0: no bound); the fuzz
// target sets it, since a few kilobytes of zstd can announce millions of
// valid rows.
var maxRows int64

// Read reads the Parquet links file at path. It refuses, with one line
// starting with the path, a file that is not Parquet, whose
// fabricsim.schema is not fabricsim.links/v2 or v1 (read with Job empty), whose metadata is missing
// or malformed, that lacks a column or has one of another type, or with a
// row outside the contract (a negative index or byte count, a bandwidth
// that is not positive and finite, a utilization that is NaN, infinite or
// negative), naming the row and column.
func Read(path string) (Meta, []Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, nil, pathError(path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Meta{}, nil, pathError(path, err)
	}
	if st.IsDir() {
		return Meta{}, nil, fmt.Errorf("%s: is a directory", path)
	}
	if !st.Mode().IsRegular() { // a pipe or device: Parquet needs random access
		data, err := io.ReadAll(f)
		if err != nil {
			return Meta{}, nil, fmt.Errorf("%s: %s", path, errtext.OneLine(err))
		}
		return Decode(path, bytes.NewReader(data), int64(len(data)))
	}
	return Decode(path, f, st.Size())
}

// ReadFrom reads a links file from r (stdin), called name in errors; the
// whole input is read into memory first, since Parquet needs random access.
func ReadFrom(name string, r io.Reader) (Meta, []Row, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Meta{}, nil, fmt.Errorf("%s: %s", name, errtext.OneLine(err))
	}
	return Decode(name, bytes.NewReader(data), int64(len(data)))
}

// Decode reads a links file of size bytes from ra, called name in errors.
func Decode(name string, ra io.ReaderAt, size int64) (Meta, []Row, error) {
	var head [4]byte
	if n, _ := ra.ReadAt(head[:], 0); n < 4 || string(head[:]) != "PAR1" {
		return Meta{}, nil, fmt.Errorf("%s: not a Parquet file (a links file is read from its .parquet form; the CSV form has no metadata)", name)
	}
	f, err := pqcheck.Guard(func() (*parquet.File, error) {
		if err := pqcheck.Footer(ra, size); err != nil {
			return nil, err
		}
		return parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	})
	if err != nil {
		return Meta{}, nil, fmt.Errorf("%s: not a readable Parquet file: %s", name, errtext.OneLine(err))
	}
	m, err := decodeMeta(name, f.Lookup)
	if err != nil {
		return Meta{}, nil, err
	}
	rows, err := pqcheck.Guard(func() ([]Row, error) { return readRows(name, ra, size, f, m.Schema == SchemaV1) })
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+": ") { // a recovered fault
			err = fmt.Errorf("%s: %s", name, errtext.OneLine(err))
		}
		return Meta{}, nil, err
	}
	return m, rows, nil
}

// readRows checks the schema and every page header, then decodes and
// checks the rows.
// A v1 file has no job column (one it has is ignored, as any extra one).
func readRows(name string, ra io.ReaderAt, size int64, f *parquet.File, v1 bool) ([]Row, error) {
	want := parquet.SchemaOf(Row{})
	fields := map[string]parquet.Field{}
	for _, fl := range f.Schema().Fields() {
		if _, dup := fields[fl.Name()]; dup {
			return nil, fmt.Errorf("%s: duplicate column %q", name, fl.Name())
		}
		fields[fl.Name()] = fl
	}
	leaves := make([]int, 0, len(columns))
	for _, wf := range want.Fields() {
		if v1 && wf.Name() == "job" {
			continue
		}
		fl, ok := fields[wf.Name()]
		if !ok {
			return nil, fmt.Errorf("%s: missing column %q", name, wf.Name())
		}
		if err := checkColumn(fl, wf.Type().Kind()); err != nil {
			return nil, fmt.Errorf("%s: column %q %s", name, wf.Name(), err)
		}
		leaf, ok := f.Schema().Lookup(wf.Name())
		if !ok {
			return nil, fmt.Errorf("%s: missing column %q", name, wf.Name())
		}
		leaves = append(leaves, leaf.ColumnIndex)
	}
	total, err := pqcheck.RowGroups(name, f, maxRows)
	if err != nil {
		return nil, err
	}
	if err := pqcheck.Pages(name, ra, size, f.Metadata(), leaves, "a links file is ZSTD or UNCOMPRESSED (links.md)"); err != nil {
		return nil, err
	}
	rows := make([]Row, 0, min(total, 1<<16))
	for g, rg := range f.RowGroups() {
		r := parquet.NewGenericRowGroupReader[Row](rg)
		announced := rg.NumRows()
		got := int64(0)
		for {
			if len(rows) == cap(rows) {
				rows = append(rows[:cap(rows)], Row{})[:len(rows)]
			}
			n, err := r.Read(rows[len(rows):cap(rows)])
			from := len(rows)
			rows = rows[:from+n]
			for i := from; i < len(rows); i++ {
				if v1 {
					rows[i].Job = ""
				}
				if err := check(&rows[i]); err != nil {
					r.Close()
					return nil, fmt.Errorf("%s: row %d: %v", name, i, err)
				}
			}
			got += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("%s: row group %d: %s", name, g, errtext.OneLine(err))
			}
			if got > announced {
				break
			}
		}
		r.Close()
		if got != announced {
			return nil, fmt.Errorf("%s: row group %d has %d rows, its metadata says %d", name, g, got, announced)
		}
	}
	return rows, nil
}

// checkColumn accepts exactly the physical type of the contract, a
// REQUIRED leaf, with either no annotation or the matching one (a signed
// integer of the same width; STRING or ENUM for byte arrays).
func checkColumn(fl parquet.Field, want parquet.Kind) error {
	if !fl.Leaf() {
		return fmt.Errorf("is a group, want %s", want)
	}
	t := fl.Type()
	if t.Kind() != want {
		return fmt.Errorf("has type %s, want %s", t.Kind(), want)
	}
	if !fl.Required() {
		return errors.New("is OPTIONAL or REPEATED; links columns are REQUIRED (non-nullable)")
	}
	lt := t.LogicalType()
	if lt == nil || lt.Value == nil {
		return nil
	}
	switch v := lt.Value.(type) {
	case *format.IntType:
		if (want == parquet.Int32 && v.BitWidth == 32 || want == parquet.Int64 && v.BitWidth == 64) && v.IsSigned {
			return nil
		}
	case *format.StringType, *format.EnumType:
		if want == parquet.ByteArray {
			return nil
		}
	}
	return fmt.Errorf("has logical type %s, want %s", lt, want)
}

// pathError words an *os.PathError as "<path>: <reason>".
func pathError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}
