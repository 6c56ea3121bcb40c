package packet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Config is the packet backend's configuration, read from SimAI.conf-style
// files (one "KEY value..." per line) and KEY=VALUE overrides. Every key
// SimAI's shipped SimAI.conf uses is accepted; keys that name SimAI's own
// output files are accepted and ignored (fabricsim writes its outputs where
// --out, --monitor-dir and --simai-fct say). Unknown keys are errors.
type Config struct {
	CCMode        int     // CC_MODE: 0 none, 1 DCQCN (default), 3 HPCC, 7 TIMELY, 8 DCTCP, 10 HPCC-PINT
	EnableQCN     bool    // ENABLE_QCN: switches mark ECN (default 1)
	DynamicPFC    bool    // USE_DYNAMIC_PFC_THRESHOLD (default 1): PFC threshold shrinks as the shared buffer fills
	EnablePFC     bool    // ENABLE_PFC (fabricsim): lossless priority flow control (default 1)
	PayloadSize   int     // PACKET_PAYLOAD_SIZE bytes per data packet (default 9000)
	HeaderBytes   int     // HEADER_SIZE (fabricsim): bytes of Ethernet/IP/UDP/BTH headers per packet (default 48)
	AckBytes      int     // ACK_SIZE (fabricsim): wire bytes of an ACK/NACK (default 60)
	BufferBytes   int64   // BUFFER_SIZE: switch shared buffer; values below 1024 are MB as SimAI.conf writes them (default 32 MB)
	PauseTimePs   int64   // PAUSE_TIME us (default 5): how long a PAUSE holds without a refresh
	ResumeOffset  int64   // bytes of PFC resume hysteresis (3 KB)
	ReservePerQ   int64   // bytes reserved per ingress queue before the shared pool (4 KB)
	PFCAlphaShift int     // dynamic threshold = free buffer >> shift (3, i.e. 1/8)
	AckInterval   int     // L2_ACK_INTERVAL: ACK every N data packets (default 1)
	HasWin        bool    // HAS_WIN: window limit in addition to the rate (default 1)
	VarWin        bool    // VAR_WIN: window scales with rate/line rate (default 1)
	ErrorRate     float64 // ERROR_RATE_PER_LINK: packet loss probability added to every link
	KMin, KMax    rateMap // KMIN_MAP/KMAX_MAP: RED thresholds in KB by link rate (bit/s)
	PMax          rateMap // PMAX_MAP: RED maximum marking probability by link rate
	StopPs        int64   // SIMULATOR_STOP_TIME in ns as SimAI writes it (0 = run to the end)
	QPsPerConn    int     // QPS_PER_CONNECTION: QPs a flow is split over (default 1)
	RTOPs         int64   // RTO_US (fabricsim): go-back-N after this long without progress (default 1000 us)
	LinkDown      []LinkDown
	Routing       Routing // ROUTING (fabricsim): ecmp (default), spray, flowlet or adaptive; see routing.go
	FlowletGapPs  int64   // FLOWLET_GAP_US (fabricsim): an idle gap that starts a new flowlet (default 5 us)
	// PFC_MODE (fabricsim): priority (default: SimAI's per-queue PFC with
	// dynamic thresholds and PAUSE refreshes) or port (pfcport.go: a whole
	// ingress port paused above PFC_PORT_HIGH_KB and resumed below
	// PFC_PORT_LOW_KB, no refresh, as htsim's lossless input queues do).
	PortPFC    bool
	PortHighKB float64           // PFC_PORT_HIGH_KB; 0 = 15 packets (htsim's default)
	PortLowKB  float64           // PFC_PORT_LOW_KB; 0 = 12 packets
	Transport  Transport         // TRANSPORT (fabricsim): roce (default, go-back-N) or sack; see transport.go
	MonStartPs int64             // MON_START us: monitors sample from here (default 0)
	MonEndPs   int64             // MON_END us: and stop here (default 20000)
	QPMonPs    int64             // QP_MON_INTERVAL us: rate and CNP monitors (default 100)
	QLenMonPs  int64             // QLEN_MON_INTERVAL us: queue lengths (default 10000)
	BWMonPs    int64             // BW_MON_INTERVAL us: host bandwidth (default 10000)
	CC         cc.Params         // congestion-control keys (pkg/cc documents them); cc.New validates them
	ccConf     map[string]string // the CC keys set to other than their defaults, as written, for the trace metadata
}

// maxLinkDownNs is the latest failure time LINK_DOWN takes: one day.
const maxLinkDownNs = 86_400 * 1_000_000_000

// LinkDown fails the link between two nodes at a time (LINK_DOWN t a b, t in ns).
type LinkDown struct {
	AtPs int64
	A, B int32
}

// rateMap is SimAI's "<n> <rate_bps> <value> ..." per-link-rate table.
type rateMap struct {
	rates []float64
	vals  []float64
}

// At returns the value for a link rate: the entry of the largest rate not
// above it (the smallest entry for slower links).
func (m rateMap) At(bps float64) float64 {
	if len(m.rates) == 0 {
		return 0
	}
	i := sort.SearchFloat64s(m.rates, bps+0.5)
	if i == 0 {
		return m.vals[0]
	}
	return m.vals[i-1]
}

// DefaultConfig is SimAI.conf as SimAI ships it, plus fabricsim's keys.
func DefaultConfig() Config {
	c := Config{
		CCMode: 1, EnableQCN: true, DynamicPFC: true, EnablePFC: true, PayloadSize: 9000, HeaderBytes: 48, AckBytes: 60,
		BufferBytes: 32 << 20, PauseTimePs: 5_000_000, ResumeOffset: 3 << 10, ReservePerQ: 4 << 10, PFCAlphaShift: 3,
		AckInterval: 1, HasWin: true, VarWin: true, QPsPerConn: 1, RTOPs: 1_000_000_000, FlowletGapPs: 5_000_000,
		MonEndPs: 20_000 * 1e6, QPMonPs: 100 * 1e6, QLenMonPs: 10_000 * 1e6, BWMonPs: 10_000 * 1e6,
		CC: cc.DefaultParams(), ccConf: map[string]string{},
	}
	for _, kv := range [][2]string{
		{"KMAX_MAP", "6 25000000000 400 50000000000 800 100000000000 1600 200000000000 1200 400000000000 3200 1600000000000 2400"},
		{"KMIN_MAP", "6 25000000000 100 50000000000 200 100000000000 400 200000000000 300 400000000000 800 1600000000000 600"},
		{"PMAX_MAP", "6 25000000000 0.2 50000000000 0.2 100000000000 0.2 200000000000 0.8 400000000000 0.2 1600000000000 0.2"},
	} {
		if err := c.apply(kv[0], strings.Fields(kv[1])); err != nil {
			panic(err)
		}
	}
	return c
}

// ignoredKeys name SimAI's own output files and switches that do not apply.
var ignoredKeys = map[string]string{
	"FLOW_FILE": "SimAI's flow input", "TRACE_FILE": "SimAI's trace node list", "TRACE_OUTPUT_FILE": "SimAI's packet trace",
	"FCT_OUTPUT_FILE": "use --simai-fct", "PFC_OUTPUT_FILE": "use --monitor-dir", "QLEN_MON_FILE": "use --monitor-dir",
	"BW_MON_FILE": "use --monitor-dir", "RATE_MON_FILE": "use --monitor-dir", "CNP_MON_FILE": "use --monitor-dir",
	"ENABLE_TRACE": "packet traces are not written", "ACK_HIGH_PRIO": "ACK/NACK/CNP always use queue 0",
	"L2_WAIT_FOR_ACK": "SimAI's stop-and-wait flag", "ECN_ENABLED": "see ENABLE_QCN",
	"KMIN": "use KMIN_MAP", "KMAX": "use KMAX_MAP", "PMAX": "use PMAX_MAP",
	"L2_CHUNK_SIZE": "the go-back granularity of L2_BACK_TO_ZERO 1, which is not implemented",
}

// Validate checks what no single key can: that the keys agree with each
// other and that CC_MODE and its keys make an algorithm. Read and SetKV
// check each value as it comes; New validates again.
func (c *Config) Validate() error {
	if _, err := cc.New(c.CCMode, c.CC); err != nil {
		return fmt.Errorf("configuration: %v", err)
	}
	if c.QPsPerConn > 64 {
		return fmt.Errorf("QPS_PER_CONNECTION %d: at most 64", c.QPsPerConn) // per-flow counts are bytes
	}
	if c.PortPFC {
		if !c.EnablePFC {
			return fmt.Errorf("PFC_MODE port needs ENABLE_PFC 1")
		}
		if high, low := c.portThresholds(); low >= high {
			return fmt.Errorf("PFC_PORT_LOW_KB (%d B) must be below PFC_PORT_HIGH_KB (%d B)", low, high)
		}
	}
	return nil
}

// ReadConfig parses a SimAI.conf-style file onto c. Errors name the file,
// line and key.
func (c *Config) Read(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := c.apply(f[0], f[1:]); err != nil {
			return fmt.Errorf("%s: line %d, key %s: %v", name, n, f[0], err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %v", name, n+1, err)
	}
	return nil
}

// SetKV applies one KEY=VALUE override (--set).
func (c *Config) SetKV(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("--set %q: expected KEY=VALUE", kv)
	}
	if err := c.apply(strings.TrimSpace(k), strings.Fields(v)); err != nil {
		return fmt.Errorf("--set %s: %v", k, err)
	}
	return nil
}

func (c *Config) apply(key string, v []string) error {
	one := func() (string, error) {
		if len(v) != 1 {
			return "", fmt.Errorf("expected one value, got %d", len(v))
		}
		return v[0], nil
	}
	num := func() (float64, error) {
		s, err := one()
		if err != nil {
			return 0, err
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		return x, nil
	}
	nonneg := func() (int64, error) {
		x, err := num()
		if err != nil {
			return 0, err
		}
		if x < 0 || x > math.MaxInt64/1e6 {
			return 0, fmt.Errorf("%g must be a non-negative number", x)
		}
		if x != math.Trunc(x) { // 1.5 read as 1 would be nonsense accepted
			return 0, fmt.Errorf("%g is not a whole number", x)
		}
		return int64(x), nil
	}
	flag := func(dst *bool) error {
		x, err := num()
		if err != nil {
			return err
		}
		if x != 0 && x != 1 {
			return fmt.Errorf("%g: expected 0 or 1", x)
		}
		*dst = x == 1
		return nil
	}
	// SimAI switches fabricsim does not model: 0 (as SimAI.conf ships) is
	// accepted, 1 refused rather than silently ignored.
	notImplemented := func(what string) error {
		var on bool
		if err := flag(&on); err != nil || !on {
			return err
		}
		return fmt.Errorf("1 (%s) is not implemented; use 0 as SimAI.conf ships", what)
	}
	var err error
	var x int64
	switch key {
	case "CC_MODE":
		x, err = nonneg()
		c.CCMode = int(x)
	case "ENABLE_QCN":
		err = flag(&c.EnableQCN)
	case "USE_DYNAMIC_PFC_THRESHOLD":
		err = flag(&c.DynamicPFC)
	case "ENABLE_PFC":
		err = flag(&c.EnablePFC)
	case "PACKET_PAYLOAD_SIZE":
		if x, err = nonneg(); err == nil && (x < 64 || x > 1<<20) {
			err = fmt.Errorf("%d bytes: expected 64..1048576", x)
		}
		c.PayloadSize = int(x)
	case "HEADER_SIZE":
		x, err = nonneg()
		c.HeaderBytes = int(x)
	case "ACK_SIZE":
		if x, err = nonneg(); err == nil && x < 1 {
			err = fmt.Errorf("must be positive")
		}
		c.AckBytes = int(x)
	case "BUFFER_SIZE":
		// SimAI.conf gives MB (fractions allowed here); 1024 and up is bytes.
		var f float64
		if f, err = num(); err == nil {
			switch {
			case f <= 0 || f > 1<<40:
				err = fmt.Errorf("%g: expected a positive size in MB (below 1024) or bytes", f)
			case f < 1024:
				c.BufferBytes = int64(math.Round(f * (1 << 20)))
			case f != math.Trunc(f):
				err = fmt.Errorf("%g bytes is not a whole number", f)
			default:
				c.BufferBytes = int64(f)
			}
		}
	case "PAUSE_TIME":
		// µs, fractions allowed: the PFC refresh comes every half of it
		// (truncating 0.5 to 0 once made it re-arm at the same instant
		// forever). Below 0.1 µs, less than one 1500-byte frame at
		// 100 Gbps, refreshes outnumber the data: 0.00001 sent 31 M PAUSE
		// frames for a 234-packet incast and ran 8 s instead of 0.1 s.
		var f float64
		if f, err = num(); err == nil {
			if !(f >= 0.1 && f <= 1e6) {
				err = fmt.Errorf("%g us: expected 0.1 to 1000000 (PAUSE holds this long without a refresh)", f)
			}
			c.PauseTimePs = int64(math.Round(f * 1e6))
		}
	case "L2_ACK_INTERVAL":
		if x, err = nonneg(); err == nil && x < 1 {
			x = 1
		}
		c.AckInterval = int(x)
	case "L2_BACK_TO_ZERO":
		err = notImplemented("on NACK, go back to an L2_CHUNK_SIZE boundary")
	case "HAS_WIN":
		err = flag(&c.HasWin)
	case "VAR_WIN":
		err = flag(&c.VarWin)
	case "GLOBAL_T":
		err = notImplemented("one window for every queue pair, from the largest base RTT")
	case "ERROR_RATE_PER_LINK":
		var f float64
		if f, err = num(); err == nil && (f < 0 || f >= 1) {
			err = fmt.Errorf("%g outside [0,1)", f)
		}
		c.ErrorRate = f
	case "KMIN_MAP", "KMAX_MAP", "PMAX_MAP":
		var m rateMap
		if m, err = parseRateMap(v); err == nil {
			switch key {
			case "KMIN_MAP":
				c.KMin = m
			case "KMAX_MAP":
				c.KMax = m
			default:
				c.PMax = m
			}
		}
	case "SIMULATOR_STOP_TIME":
		var f float64
		if f, err = num(); err == nil && f < 0 {
			err = fmt.Errorf("negative")
		}
		if f > 1e15 {
			f = 0 // SimAI's "forever"
		}
		c.StopPs = int64(f * 1000)
	case "QPS_PER_CONNECTION":
		if x, err = nonneg(); err == nil && (x < 1 || x > 64) {
			err = fmt.Errorf("%d: expected 1..64", x)
		}
		c.QPsPerConn = int(x)
	case "RTO_US":
		if x, err = nonneg(); err == nil && x < 1 {
			err = fmt.Errorf("must be at least 1 us")
		}
		c.RTOPs = x * 1_000_000
	case "ROUTING":
		err = setEnum(v, routingNames[:], &c.Routing)
	case "FLOWLET_GAP_US":
		var f float64
		if f, err = num(); err == nil && !(f >= 0.001 && f <= 1e6) {
			err = fmt.Errorf("%g us: expected 0.001 to 1000000", f)
		}
		c.FlowletGapPs = int64(math.Round(f * 1e6))
	case "TRANSPORT":
		err = setEnum(v, transportNames[:], &c.Transport)
	case "PFC_MODE":
		var m string
		if m, err = one(); err == nil {
			switch m {
			case "priority", "port":
				c.PortPFC = m == "port"
			default:
				err = fmt.Errorf("%q: expected priority or port", m)
			}
		}
	case "PFC_PORT_HIGH_KB", "PFC_PORT_LOW_KB":
		var f float64
		if f, err = num(); err == nil && !(f > 0 && f <= 1<<30) {
			err = fmt.Errorf("%g KB: expected a positive size up to 2^30 KB", f)
		}
		if key == "PFC_PORT_HIGH_KB" {
			c.PortHighKB = f
		} else {
			c.PortLowKB = f
		}
	case "LINK_DOWN":
		if len(v) != 3 {
			return fmt.Errorf("expected <time_ns> <node_a> <node_b>")
		}
		// The time must fit the simulator's picoseconds (a day at most)
		// and the nodes an int32: past either they once wrapped around,
		// onto another link or into the past.
		var t, a, b int64
		for i, dst := range []*int64{&t, &a, &b} {
			limit := int64(math.MaxInt32)
			if i == 0 {
				limit = maxLinkDownNs
			}
			if *dst, err = strconv.ParseInt(v[i], 10, 64); err != nil || *dst < 0 || *dst > limit {
				return fmt.Errorf("%q is not an integer from 0 to %d", v[i], limit)
			}
		}
		if t == 0 && a == 0 && b == 0 {
			return nil // SimAI's "no failure"
		}
		c.LinkDown = append(c.LinkDown, LinkDown{AtPs: t * 1000, A: int32(a), B: int32(b)})
	case "MON_START", "MON_END", "QP_MON_INTERVAL", "QLEN_MON_INTERVAL", "BW_MON_INTERVAL":
		// Microseconds, as SimAI's monitors read them (QLEN 10000 = 10 ms).
		var f float64
		if f, err = num(); err == nil && (f < 0 || f > 1e12) {
			err = fmt.Errorf("%g us out of range", f)
		}
		ps := int64(f * 1e6)
		if err == nil && ps < 1000 && key != "MON_START" && key != "MON_END" {
			err = fmt.Errorf("interval must be at least 0.001 us")
		}
		switch key {
		case "MON_START":
			c.MonStartPs = ps
		case "MON_END":
			c.MonEndPs = ps
		case "QP_MON_INTERVAL":
			c.QPMonPs = ps
		case "QLEN_MON_INTERVAL":
			c.QLenMonPs = ps
		default:
			c.BWMonPs = ps
		}
	default:
		if ignoredKeys[key] != "" {
			break
		}
		val := strings.Join(v, " ")
		if err = c.CC.Set(key, val); errors.Is(err, cc.ErrUnknownKey) {
			return fmt.Errorf("unknown key (examples/conf/default.conf lists the keys)")
		}
		if err == nil {
			// The metadata lists the keys whose values differ from the
			// defaults, however a file spells them: SimAI.conf and
			// default.conf, which both write the defaults, give the same
			// trace.
			def := cc.DefaultParams()
			if def.Set(key, val) == nil && def == cc.DefaultParams() {
				delete(c.ccConf, key)
			} else {
				c.ccConf[key] = val
			}
		}
	}
	return err
}

// parseEnum reads one of names as its index: "a or b", "a, b or c".
func parseEnum[T ~uint8](s string, names []string) (T, error) {
	if i := slices.Index(names, s); i >= 0 {
		return T(i), nil
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return 0, fmt.Errorf("%q: expected %s", s, list)
}

// setEnum sets *dst from a key's one value, leaving it as it was on error.
func setEnum[T ~uint8](v []string, names []string, dst *T) error {
	if len(v) != 1 {
		return fmt.Errorf("expected one value, got %d", len(v))
	}
	x, err := parseEnum[T](v[0], names)
	if err == nil {
		*dst = x
	}
	return err
}

func parseRateMap(v []string) (rateMap, error) {
	if len(v) == 0 {
		return rateMap{}, fmt.Errorf("empty map")
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || len(v) != 1+2*n {
		return rateMap{}, fmt.Errorf("expected <n> then n pairs of <rate_bps> <value>")
	}
	var m rateMap
	for i := 0; i < n; i++ {
		r, err1 := strconv.ParseFloat(v[1+2*i], 64)
		x, err2 := strconv.ParseFloat(v[2+2*i], 64)
		if err1 != nil || err2 != nil || r <= 0 || x < 0 {
			return rateMap{}, fmt.Errorf("pair %d (%s %s) is not a positive rate and a value", i+1, v[1+2*i], v[2+2*i])
		}
		if i > 0 && r <= m.rates[i-1] {
			return rateMap{}, fmt.Errorf("rates must increase")
		}
		m.rates = append(m.rates, r)
		m.vals = append(m.vals, x)
	}
	return m, nil
}

// Describe lists the effective settings, for trace metadata.
func (c *Config) Describe() map[string]any {
	d := map[string]any{
		"cc_mode": c.CCMode, "enable_qcn": c.EnableQCN, "enable_pfc": c.EnablePFC, "dynamic_pfc": c.DynamicPFC,
		"payload_bytes": c.PayloadSize, "buffer_bytes": c.BufferBytes, "ack_interval": c.AckInterval,
		"has_win": c.HasWin, "var_win": c.VarWin, "qps_per_connection": c.QPsPerConn, "error_rate": c.ErrorRate,
		"pause_time": units.FormatDuration(c.PauseTimePs), "rto": units.FormatDuration(c.RTOPs), "cc": c.ccConf,
	}
	// Only when not the default, so that default runs' traces stay as they were.
	if c.Transport != TransportRoCE {
		d["transport"] = c.Transport.String()
	}
	if c.PortPFC {
		d["pfc_mode"] = "port"
		d["pfc_port_high_bytes"], d["pfc_port_low_bytes"] = c.portThresholds()
	}
	if c.Routing != RouteECMP {
		d["routing"] = c.Routing.String()
		if c.Routing == RouteFlowlet {
			d["flowlet_gap"] = units.FormatDuration(c.FlowletGapPs)
		}
	}
	return d
}
