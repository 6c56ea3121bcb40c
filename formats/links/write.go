package links

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/fabricsim/fabricsim/formats/internal/errtext"
	"github.com/fabricsim/fabricsim/formats/internal/pqcheck"
	"github.com/fabricsim/fabricsim/internal/outfile"
)

// Write writes rows with the metadata m to path, as Parquet (.parquet,
// .pq) or plain CSV (.csv: one header line with the column names, then one
// line per row; the metadata goes to Parquet only, so that pandas and
// DuckDB read the CSV with no options). Rows go out sorted by link, src,
// group_type and op (rows is not modified). It refuses a row that Read
// would refuse or that carries 0 bytes, naming its index and column, and
// m's fields outside their lists. The file
// is written under a temporary name beside path and renamed into place
// when complete (a device or pipe is written in place).
func Write(path string, m Meta, rows []Row) error {
	format, err := Format(path)
	if err != nil {
		return err
	}
	keys, values, err := encodeMeta(m)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for i := range rows {
		if err := check(&rows[i]); err != nil {
			return fmt.Errorf("%s: row %d: %v", path, i, err)
		}
		if rows[i].Bytes == 0 {
			return fmt.Errorf("%s: row %d: column %q is 0; a row is written only for bytes carried", path, i, "bytes")
		}
	}
	if !slices.IsSortedFunc(rows, compareRows) {
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, compareRows)
	}
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	if format == "csv" {
		err = writeCSV(f, rows)
	} else {
		err = writeParquet(f, keys, values, rows)
	}
	if err = f.Finish(err); err != nil {
		return fmt.Errorf("%s: %s", path, errtext.OneLine(err))
	}
	return nil
}

// compareRows orders rows by link, direction, group type, op and job.
func compareRows(a, b Row) int {
	return cmp.Or(cmp.Compare(a.Link, b.Link), cmp.Compare(a.Src, b.Src),
		strings.Compare(a.GroupType, b.GroupType), strings.Compare(a.Op, b.Op), strings.Compare(a.Job, b.Job))
}

// writeParquet writes the rows as Parquet with zstd (its fastest level),
// the root called "schema" as pyarrow names it, strings
// dictionary-encoded, and the metadata as key/value pairs.
func writeParquet(w io.Writer, keys, values []string, rows []Row) error {
	opts := []parquet.WriterOption{
		parquet.NewSchema("schema", parquet.SchemaOf(Row{})),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
	}
	for i := range keys {
		opts = append(opts, parquet.KeyValueMetadata(keys[i], values[i]))
	}
	pw := parquet.NewGenericWriter[Row](w, opts...)
	return pqcheck.WriteRows(pw, rows)
}

// writeCSV writes the header line and one line per row; floats in their
// shortest round-trip form.
func writeCSV(w io.Writer, rows []Row) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	if err := cw.Write(columns); err != nil {
		return err
	}
	rec := make([]string, len(columns))
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	f64 := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for i := range rows {
		r := &rows[i]
		rec[0], rec[1], rec[2] = i64(int64(r.Link)), i64(int64(r.Src)), i64(int64(r.Dst))
		rec[3], rec[4], rec[5], rec[6] = r.SrcRole, r.DstRole, r.Tier, r.Kind
		rec[7], rec[8], rec[9], rec[10] = f64(r.BWbps), r.GroupType, r.Op, r.Job
		rec[11], rec[12], rec[13] = i64(r.Bytes), i64(r.BusyNs), f64(r.Utilization)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}
