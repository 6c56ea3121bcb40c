// Package units parses and formats the quantities fabricsim's command lines
// and config files use: sizes (64MiB, 1GB, plain bytes), bandwidths
// (400Gbps, 50GB/s, plain bit/s) and durations (1us, 3ms, plain ps where
// noted). Internally sizes are bytes, bandwidths bit/s, times picoseconds.
package units

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParseError is a value that does not parse as a size, bandwidth or time.
type ParseError struct{ msg string }

func (e *ParseError) Error() string { return e.msg }

func perr(format string, args ...any) error { return &ParseError{fmt.Sprintf(format, args...)} }

// Size is a byte count that parses from "64MiB", "1GB", "4KB" or "1048576".
// Decimal prefixes (KB, MB, GB, TB) are powers of 1000, binary ones (KiB...)
// powers of 1024, as nccl-tests and IEC use them.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, // nccl-tests style -b 8M
	{"B", 1},
}

// ParseSize parses a size in bytes.
func ParseSize(s string) (int64, error) {
	v, err := parseWithUnits(s, func(u string) (float64, bool) {
		for _, su := range sizeUnits {
			if u == su.suffix {
				return su.mult, true
			}
		}
		return 0, false
	})
	if err != nil {
		return 0, perr("bad size %q: %v (use e.g. 64MiB, 1GB or a byte count)", s, err)
	}
	if v < 0 || v != math.Trunc(v) {
		return 0, perr("bad size %q: must be a whole, non-negative number of bytes", s)
	}
	if v > math.MaxInt64/2 {
		return 0, perr("bad size %q: above 4EiB, beyond any 64-bit byte count fabricsim keeps", s)
	}
	return int64(v), nil
}

func (z *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	*z = Size(v)
	return err
}

func (z Size) String() string { return FormatSize(int64(z)) }

// FormatSize writes bytes with the largest exact binary unit.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// HumanSize writes a size for people in the unit its value calls for:
// the largest binary unit it reaches, exact when it is a whole number of
// it ("64MiB"), else exact in the decimal unit it reaches ("8MB" for 8e6,
// as workloads often give sizes), else to four significant digits
// ("1.177MiB", "135.5GiB", never "142047214KiB"). Unlike FormatSize it
// goes up to EiB and EB, which ParseSize does not read.
func HumanSize(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	a := n
	if a < 0 {
		a = -a
	}
	i := 0 // the largest binary unit a reaches: 1024^(i+1)
	for i+1 < len(units) && a>>(10*(i+2)) > 0 {
		i++
	}
	if b := int64(1) << (10 * (i + 1)); n%b == 0 {
		return strconv.FormatInt(n/b, 10) + string(units[i]) + "iB"
	}
	j, d := 0, int64(1000) // the largest decimal unit a reaches
	for j+1 < len(units) && a/d >= 1000 {
		j, d = j+1, d*1000
	}
	if n%d == 0 {
		return strconv.FormatInt(n/d, 10) + string(units[j]) + "B"
	}
	return trimFloat(float64(n)/float64(int64(1)<<(10*(i+1)))) + string(units[i]) + "iB"
}

// ExactSize writes a size exactly in the largest unit, binary first, that
// divides it ("142047214KiB" when no larger one does): for labels that
// must not change once written (a sweep step's, in the flow stream).
func ExactSize(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	for i := len(units) - 1; i >= 0; i-- {
		if b := int64(1) << (10 * (i + 1)); n%b == 0 && (n >= b || n <= -b) {
			return strconv.FormatInt(n/b, 10) + string(units[i]) + "iB"
		}
	}
	for i, d := len(units)-1, int64(1e18); i >= 0; i, d = i-1, d/1000 {
		if n%d == 0 && (n >= d || n <= -d) {
			return strconv.FormatInt(n/d, 10) + string(units[i]) + "B"
		}
	}
	v, i := float64(n), -1
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + string(units[i]) + "iB"
}

// Bandwidth is a rate in bit/s that parses from "400Gbps", "2880Gbps",
// "50GB/s" (bytes per second) or "100Mb/s". A plain number is rejected, as
// for times: "400" would be 400 bit/s, and the unit matters.
type Bandwidth float64

var bwUnits = map[string]float64{
	"bps": 1, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12,
	"b/s": 1, "Kb/s": 1e3, "Mb/s": 1e6, "Gb/s": 1e9, "Tb/s": 1e12,
	"B/s": 8, "KB/s": 8e3, "MB/s": 8e6, "GB/s": 8e9, "TB/s": 8e12,
	"Bps": 8, "KBps": 8e3, "MBps": 8e6, "GBps": 8e9, "TBps": 8e12,
}

// ParseBandwidth parses a bandwidth into bit/s.
func ParseBandwidth(s string) (float64, error) {
	v, err := parseWithUnits(s, func(u string) (float64, bool) { m, ok := bwUnits[u]; return m, ok })
	if err == nil && !hasUnit(s) {
		return 0, perr("bad bandwidth %q: missing unit (%sbps would be bit/s; use e.g. %sGbps or 50GB/s)", s, strings.TrimSpace(s), strings.TrimSpace(s))
	}
	if err != nil {
		return 0, perr("bad bandwidth %q: %v (use e.g. 400Gbps or 50GB/s)", s, err)
	}
	if v <= 0 || math.IsInf(v, 0) {
		return 0, perr("bad bandwidth %q: must be positive", s)
	}
	return v, nil
}

func (b *Bandwidth) UnmarshalText(t []byte) error {
	v, err := ParseBandwidth(string(t))
	*b = Bandwidth(v)
	return err
}

func (b Bandwidth) String() string { return FormatBandwidth(float64(b)) }

// FormatBandwidth writes bit/s in the largest unit that keeps it readable.
func FormatBandwidth(bps float64) string {
	switch {
	case bps >= 1e12 && math.Mod(bps, 1e12) == 0:
		return strconv.FormatFloat(bps/1e12, 'f', -1, 64) + "Tbps"
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'f', -1, 64) + "Gbps"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'f', -1, 64) + "Mbps"
	}
	return strconv.FormatFloat(bps, 'f', -1, 64) + "bps"
}

// HumanBandwidth writes bit/s for people: Gbps below 1 Tbps, else Tbps,
// with at most four significant digits.
func HumanBandwidth(bps float64) string {
	v, unit := bps/1e9, " Gbps"
	if bps >= 1e15 {
		v, unit = bps/1e15, " Pbps"
	} else if bps >= 1e12 {
		v, unit = bps/1e12, " Tbps"
	}
	if v >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64) + unit
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + unit
}

// Duration is a time in picoseconds that parses from "25ns", "1us", "3ms",
// "0.0005ms", "2s" or "500ps". A plain number is rejected: the unit matters.
type Duration int64

var timeUnits = map[string]float64{"ps": 1, "ns": 1e3, "us": 1e6, "µs": 1e6, "ms": 1e9, "s": 1e12, "min": 60e12, "h": 3600e12}

// ParseDuration parses a time into picoseconds.
func ParseDuration(s string) (int64, error) {
	v, err := parseWithUnits(s, func(u string) (float64, bool) { m, ok := timeUnits[u]; return m, ok })
	if err == nil && !hasUnit(s) {
		err = fmt.Errorf("missing unit")
	}
	if err != nil {
		return 0, perr("bad time %q: %v (use e.g. 500ns, 1us or 3ms)", s, err)
	}
	if v < 0 || v > math.MaxInt64/2 {
		return 0, perr("bad time %q: must be non-negative", s)
	}
	if v > 0 && math.Round(v) == 0 {
		// It would read as 0, which many keys take as "none" or "never".
		return 0, perr("bad time %q: under a picosecond, the resolution", s)
	}
	return int64(math.Round(v)), nil
}

func hasUnit(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && (s[len(s)-1] < '0' || s[len(s)-1] > '9') && s[len(s)-1] != '.'
}

func (d *Duration) UnmarshalText(t []byte) error {
	v, err := ParseDuration(string(t))
	*d = Duration(v)
	return err
}

func (d Duration) String() string { return FormatDuration(int64(d)) }

// FormatDuration writes picoseconds with the largest unit that divides them.
func FormatDuration(ps int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"s", 1e12}, {"ms", 1e9}, {"us", 1e6}, {"ns", 1e3}} {
		if ps != 0 && ps%u.m == 0 {
			return strconv.FormatInt(ps/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(ps, 10) + "ps"
}

// parseWithUnits splits "12.5Gbps" into 12.5 and "Gbps" and applies the unit.
// An empty unit multiplies by one.
func parseWithUnits(s string, unit func(string) (float64, bool)) (float64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+') || (s[i] == '-' || s[i] == '+') && (i == 0 || s[i-1] == 'e')) {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("no number")
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("not a number")
	}
	u := strings.TrimSpace(s[i:])
	if u == "" {
		return v, nil
	}
	m, ok := unit(u)
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", u)
	}
	return v * m, nil
}

// DTypes are nccl-tests' data types (-d) and their element sizes in bytes.
var DTypes = map[string]int64{
	"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
	"half": 2, "float": 4, "double": 8, "bfloat16": 2,
	"f8e4m3": 1, "f8e5m2": 1,
}

// DTypeNames lists DTypes, sorted.
func DTypeNames() []string { return slices.Sorted(maps.Keys(DTypes)) }

// ParseNumber reads a plain decimal number as config files write it:
// digits with an optional sign, point and exponent, nothing else. Go's
// ParseFloat also takes "1_0" (10), hex floats, "Inf" and "NaN", which no
// config file means; a value that overflows float64 is refused too.
func ParseNumber(s string) (float64, error) {
	if !isDecimal(s) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q is not a number in range", s)
	}
	return x, nil
}

// isDecimal: [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	n := digits()
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// HumanDuration writes picoseconds for people in the unit the value
// calls for (ps, ns, us, ms, s) with four significant digits, as
// ParseDuration reads it back: "11.4s", "392.8us".
func HumanDuration(ps int64) string {
	s := TimeScale(float64(ps) / 1e3)
	return trimFloat(float64(ps)/1e3/s.Div) + s.Unit
}

// Scale is the unit a range of values is shown in: a value v reads as
// v/Div followed by Unit.
type Scale struct {
	Div  float64
	Unit string
}

// TimeScale picks ns, us, ms or s for times of nanoseconds up to maxNs,
// so that the largest reads between 1 and 1000 (below 1 ns: ps).
func TimeScale(maxNs float64) Scale {
	m := math.Abs(maxNs)
	switch {
	case m >= 1e9:
		return Scale{1e9, "s"}
	case m >= 1e6:
		return Scale{1e6, "ms"}
	case m >= 1e3:
		return Scale{1e3, "us"}
	case m >= 1 || m == 0:
		return Scale{1, "ns"}
	}
	return Scale{1e-3, "ps"}
}

// SizeScale picks B, KiB, MiB, GiB, TiB or PiB for sizes up to maxBytes.
func SizeScale(maxBytes float64) Scale {
	s := Scale{1, "B"}
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		if math.Abs(maxBytes) < s.Div*1024 {
			break
		}
		s = Scale{s.Div * 1024, u}
	}
	return s
}

// trimFloat writes v with four significant digits, none after the point
// from 1000 on, without trailing zeros.
func trimFloat(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	s := strconv.FormatFloat(v, 'f', max(0, 3-int(math.Floor(math.Log10(math.Max(math.Abs(v), 1))))), 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Plural counts a noun for people: "1 rank", "2 ranks".
func Plural(n int64, noun string) string {
	if n == 1 || n == -1 {
		return strconv.FormatInt(n, 10) + " " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
