package packet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/internal/confkey"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
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
	// dynamic thresholds and PAUSE refreshes) or port (pfc.go: a whole
	// ingress port paused above PFC_PORT_HIGH_KB and resumed below
	// PFC_PORT_LOW_KB, no refresh, as htsim's lossless input queues do).
	PortPFC bool
	// TIE_ORDER (fabricsim): maker (default: events of one instant in the
	// order of the nodes that made them, shuffled per instant, as every
	// partitioned run orders them) or push (in the order they were
	// scheduled, as ns-3's scheduler does: the single loop only, and a
	// fifth less CPU on a symmetric fabric, whose buckets of hundreds of
	// exact ties then need no sorting; see Sim.seq).
	PushTies   bool
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

	// ACK_COALESCE (fabricsim): 0 (default) off; N > 0 acknowledges every
	// N in-order packets of a queue pair, its last, and any packet its
	// sender asked an ACK for (see nic.sendData).
	AckCoalesce int

	// ECMP_KEY (fabricsim): what a queue pair's ECMP hash is drawn for:
	// transfer (default: each transfer opens its own, as SimAI) or
	// connection (NCCL's one queue pair per GPU pair and channel, so all
	// the connection's transfers take one path), as flowsim-analytical's
	// --ecmp-key.
	ECMPKey route.HashKey

	notes []string // what Read found valid but of no effect (Warnings)
}

// maxLinkDownNs is the latest failure time LINK_DOWN takes: one day.
const maxLinkDownNs = 86_400 * 1_000_000_000

// LinkDown fails the link between two nodes at a time (LINK_DOWN t a b, t in ns).
type LinkDown struct {
	AtPs int64
	A, B int32
	// Src is where it was set ("FILE: line N, key LINK_DOWN" or "--set
	// LINK_DOWN"): whether the nodes have a link is known only with the
	// topology, and that error must still name the line to fix.
	Src string
}

// noLink is the error for a failure naming two nodes without a link,
// worded as flowsim-analytical's --link-down says it.
func (ld LinkDown) noLink(nodes int) error {
	where := ld.Src
	if where == "" {
		where = "LINK_DOWN"
	}
	return fmt.Errorf("%s: no link between nodes %d and %d in the topology (%d nodes)", where, ld.A, ld.B, nodes)
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

// DefaultConfig is SimAI.conf as SimAI ships it, plus fabricsim's keys:
// every row's default of the key table (schema.go) applied.
func DefaultConfig() Config {
	c := Config{ResumeOffset: 3 << 10, ReservePerQ: 4 << 10, PFCAlphaShift: 3, CC: cc.DefaultParams(), ccConf: map[string]string{}}
	for i := range confKeys {
		k := &confKeys[i]
		if k.Default == "" {
			continue
		}
		if err := c.apply(k.Name, strings.Fields(k.Default)); err != nil {
			panic(fmt.Sprintf("%s %q: %v", k.Name, k.Default, err)) // the table is wrong
		}
	}
	return c
}

// Validate checks what no single key can: that the keys agree with each
// other and that CC_MODE and its keys make an algorithm. Read and SetKV
// check each value as it comes; New validates again.
func (c *Config) Validate() error {
	if err := c.checkRED(); err != nil {
		return err
	}
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

// Warnings lists settings that are valid but have no effect, for the
// command to print once: PFC_PORT_* keys only act under PFC_MODE port,
// and a file's DCQCN_PROFILE whose keys it all restates after it does nothing.
func (c *Config) Warnings() []string {
	w := slices.Clone(c.notes)
	if !c.PortPFC && (c.PortHighKB != 0 || c.PortLowKB != 0) {
		w = append(w, "PFC_PORT_HIGH_KB and PFC_PORT_LOW_KB are ignored under PFC_MODE priority (set PFC_MODE port to use them)")
	}
	return w
}

// Read parses a SimAI.conf-style file onto c. Errors name the file,
// line and key. A key given twice is refused naming both lines: keeping
// the last silently hid typos, and SimAI's own files repeat none.
func (c *Config) Read(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	seen := map[string]int{}
	n := 0
	prof, profAt := "", 0 // the DCQCN profile named and its line
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
		if prev, dup := seen[dupKey(f[0])]; dup {
			return fmt.Errorf("%s: line %d, key %s: given again (first on line %d)", name, n, f[0], prev)
		} else if once(f[0]) {
			seen[dupKey(f[0])] = n
		}
		if dupKey(f[0]) == profileKey {
			if k := profileOverrides(seen); k != "" {
				return fmt.Errorf("%s: line %d, key %s: would replace %s: give the profile first", name, n, f[0], k)
			}
			if len(f) > 1 {
				prof, profAt = strings.ToLower(f[1]), n
			}
		}
		if err := c.applyFrom(f[0], f[1:], fmt.Sprintf("%s: line %d, key %s", name, n, f[0])); err != nil {
			return fmt.Errorf("%s: line %d, key %s: %v", name, n, f[0], err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %v", name, n+1, err)
	}
	// The keys after the profile define the run, which is valid: say
	// that the profile line does nothing rather than stop it.
	if first, last := profileShadowed(prof, seen); first > 0 {
		c.notes = append(c.notes, fmt.Sprintf("%s: line %d, key %s: %s has no effect: every key it sets is given after it (lines %d-%d); use --set %s=%s or delete them",
			name, profAt, profileKey, prof, first, last, profileKey, prof))
	}
	return nil
}

// dupKey is the spelling two settings of one key share (pkg/cc takes
// its keys in any case).
func dupKey(key string) string { return strings.ToUpper(key) }

// once says whether a key may appear once only: list keys
// (LINK_DOWN, one failure a line) add up instead of replacing.
func once(key string) bool {
	k := confKeyNamed(key)
	return k == nil || k.Type != "list"
}

// SetKV applies one KEY=VALUE override (--set).
func (c *Config) SetKV(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("--set %q: expected KEY=VALUE", kv)
	}
	if err := c.applyFrom(strings.TrimSpace(k), strings.Fields(v), "--set "+k); err != nil {
		return fmt.Errorf("--set %s: %v", k, err)
	}
	return nil
}

// SetKVs applies the --set overrides in order, refusing a key set twice
// (naming both), as Read does for a file; they override the file's keys.
func (c *Config) SetKVs(kvs []string) error {
	seen := map[string]string{}
	// A profile first, so that the keys it sets can be overridden in
	// any order on the command line.
	kvs = slices.Clone(kvs)
	slices.SortStableFunc(kvs, func(a, b string) int { return profileLast(a) - profileLast(b) })
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if prev, dup := seen[dupKey(k)]; dup && k != "" {
			return fmt.Errorf("--set %s: given twice (--set %s and --set %s)", k, prev, kv)
		} else if k != "" && once(k) {
			seen[dupKey(k)] = kv
		}
		if err := c.SetKV(kv); err != nil {
			return err
		}
	}
	return nil
}

// profileLast is 0 for a DCQCN_PROFILE setting, 1 for any other.
func profileLast(kv string) int {
	k, _, _ := strings.Cut(kv, "=")
	if dupKey(strings.TrimSpace(k)) == profileKey {
		return 0
	}
	return 1
}

// applyFrom applies a key as apply does, and marks the LINK_DOWN
// failures it adds as set at src.
func (c *Config) applyFrom(key string, v []string, src string) error {
	n := len(c.LinkDown)
	err := c.apply(key, v)
	for i := n; i < len(c.LinkDown); i++ {
		c.LinkDown[i].Src = src
	}
	return err
}

// apply sets one key from its values: the key's row (schema.go) parses
// and range-checks them, then sets the field; keys it does not hold are
// pkg/cc's.
func (c *Config) apply(key string, v []string) error {
	k := confKeyNamed(key)
	if k == nil {
		return c.applyCC(key, v)
	}
	x, err := k.parse(v)
	if err != nil || k.set == nil {
		return err
	}
	return k.set(c, x, v)
}

// applyCC sets a congestion-control key and remembers it for the trace
// metadata.
func (c *Config) applyCC(key string, v []string) error {
	val := strings.Join(v, " ")
	err := c.CC.Set(key, val)
	if errors.Is(err, cc.ErrUnknownKey) {
		return fmt.Errorf("unknown key (flowsim-packet --keys lists the keys)")
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

// parseRateMap reads a RED map; each value must lie in vals (its unit
// unit): a NaN threshold or a probability above 1 once ran as marking
// every packet. Numbers are read strictly (units.ParseNumber).
func parseRateMap(v []string, vals, unit string) (rateMap, error) {
	if len(v) == 0 {
		return rateMap{}, fmt.Errorf("empty map")
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || len(v) != 1+2*n {
		return rateMap{}, fmt.Errorf("expected <n> then n pairs of <rate_bps> <value>")
	}
	rng := confkey.ParseInterval(vals)
	var m rateMap
	for i := 0; i < n; i++ {
		r, err1 := units.ParseNumber(v[1+2*i])
		x, err2 := units.ParseNumber(v[2+2*i])
		if err1 != nil || err2 != nil || r <= 0 {
			return rateMap{}, fmt.Errorf("pair %d (%s %s) is not a positive rate and a value", i+1, v[1+2*i], v[2+2*i])
		}
		if err := rng.Check(x, unit); err != nil {
			return rateMap{}, fmt.Errorf("pair %d (%s %s): %v", i+1, v[1+2*i], v[2+2*i], err)
		}
		if i > 0 && r <= m.rates[i-1] {
			return rateMap{}, fmt.Errorf("rates must increase")
		}
		m.rates = append(m.rates, r)
		m.vals = append(m.vals, x)
	}
	return m, nil
}

// checkRED refuses a KMIN above KMAX at any link rate either map names:
// RED marks nothing between them then, or everything, depending on the
// order of the checks.
func (c *Config) checkRED() error {
	for _, r := range slices.Concat(c.KMin.rates, c.KMax.rates) {
		if lo, hi := c.KMin.At(r), c.KMax.At(r); lo > hi {
			return fmt.Errorf("KMIN_MAP (%g KB) is above KMAX_MAP (%g KB) at %g bit/s", lo, hi, r)
		}
	}
	return nil
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
	if c.PushTies {
		d["tie_order"] = "push"
	}
	if c.AckCoalesce > 0 {
		d["ack_coalesce"] = c.AckCoalesce
	}
	if c.ECMPKey != route.KeyTransfer {
		d["ecmp_key"] = c.ECMPKey.String() // as flowsim-analytical names it
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
