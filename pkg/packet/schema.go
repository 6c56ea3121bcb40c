package packet

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/internal/confkey"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// confKeys is every SimAI.conf key flowsim-packet reads, except pkg/cc's
// (cc.Schema), one row each: the value's type, unit and range, the default
// as a file writes it, what it means, and the field it sets. Config.apply
// parses and checks a value with its row; DefaultConfig applies every
// default; Schema lists them (flowsim-packet --keys). Keys SimAI uses for
// its own files are accepted and ignored; SimAI switches fabricsim does not
// model are accepted at 0 and refused at 1.
var confKeys = []confKey{
	{Key: confkey.Key{Name: "CC_MODE", Type: "integer", Range: "[0,10]", Default: "1", Doc: "congestion control: 0 none, 1 DCQCN, 3 HPCC, 7 TIMELY, 8 DCTCP, 10 HPCC-PINT"},
		set: func(c *Config, x float64, _ []string) error { c.CCMode = int(x); return nil }},
	{Key: confkey.Key{Name: "DCQCN_PROFILE", Type: "choice", Range: strings.Join(cc.ProfileNames(), "|"), Default: "simai", Doc: "fabricsim: DCQCN's values: SimAI.conf's (timer rounds only), or a ConnectX NIC's firmware defaults (byte counter every 32767 B, RP_TIMER 300, RATE_AI 5Mb/s, CNPs 4 us apart: pkg/cc/profile.go); it sets those keys, which --set keys and later lines override"},
		set: setProfile},
	{Key: confkey.Key{Name: "ENABLE_QCN", Type: "flag", Default: "1", Doc: "switches mark ECN (RED per link rate: KMIN_MAP, KMAX_MAP, PMAX_MAP)"},
		set: func(c *Config, x float64, _ []string) error { c.EnableQCN = x == 1; return nil }},
	{Key: confkey.Key{Name: "USE_DYNAMIC_PFC_THRESHOLD", Type: "flag", Default: "1", Doc: "PFC threshold = free shared buffer / 8 instead of a fixed share"},
		set: func(c *Config, x float64, _ []string) error { c.DynamicPFC = x == 1; return nil }},
	{Key: confkey.Key{Name: "ENABLE_PFC", Type: "flag", Default: "1", Doc: "fabricsim: lossless PFC (0: overflow drops, go-back-N repairs)"},
		set: func(c *Config, x float64, _ []string) error { c.EnablePFC = x == 1; return nil }},
	{Key: confkey.Key{Name: "PAUSE_TIME", Type: "time", Unit: "us", Range: "[0.1,1e6]", Default: "5", Doc: "a PAUSE holds this long unless refreshed (refreshed every half)"},
		// Fractions allowed: truncating 0.5 to 0 once made the refresh
		// re-arm at the same instant forever. Below 0.1 µs, less than one
		// 1500-byte frame at 100 Gbps, refreshes outnumber the data:
		// 0.00001 sent 31 M PAUSE frames for a 234-packet incast.
		set: func(c *Config, x float64, _ []string) error { c.PauseTimePs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "PFC_MODE", Type: "choice", Range: "priority|port", Default: "priority", Doc: "fabricsim: SimAI's per-queue PFC, or a whole ingress port paused above PFC_PORT_HIGH_KB and resumed below PFC_PORT_LOW_KB, no refresh (htsim's)"},
		set: func(c *Config, x float64, _ []string) error { c.PortPFC = x == 1; return nil }},
	{Key: confkey.Key{Name: "TIE_ORDER", Type: "choice", Range: "maker|push", Default: "maker", Doc: "fabricsim: events of one instant in the order of the nodes that made them (shuffled per instant; every --threads run's order) or in the order they were scheduled (ns-3's; the single loop only, and faster on symmetric fabrics)"},
		set: func(c *Config, x float64, _ []string) error { c.PushTies = x == 1; return nil }},
	{Key: confkey.Key{Name: "PFC_PORT_HIGH_KB", Type: "number", Unit: "KB", Range: "(0,1073741824]", Doc: "fabricsim, PFC_MODE port: pause threshold (unset: 15 packets)"},
		set: func(c *Config, x float64, _ []string) error { c.PortHighKB = x; return positiveBytes(x) }},
	{Key: confkey.Key{Name: "PFC_PORT_LOW_KB", Type: "number", Unit: "KB", Range: "(0,1073741824]", Doc: "fabricsim, PFC_MODE port: resume threshold (unset: 12 packets)"},
		set: func(c *Config, x float64, _ []string) error { c.PortLowKB = x; return positiveBytes(x) }},
	{Key: confkey.Key{Name: "PACKET_PAYLOAD_SIZE", Type: "integer", Unit: "bytes", Range: "[64,1048576]", Default: "9000", Doc: "payload per data packet"},
		set: func(c *Config, x float64, _ []string) error { c.PayloadSize = int(x); return nil }},
	{Key: confkey.Key{Name: "HEADER_SIZE", Type: "integer", Unit: "bytes", Range: "[0,1048576]", Default: "48", Doc: "fabricsim: Ethernet/IP/UDP/BTH header bytes per packet"},
		set: func(c *Config, x float64, _ []string) error { c.HeaderBytes = int(x); return nil }},
	{Key: confkey.Key{Name: "ACK_SIZE", Type: "integer", Unit: "bytes", Range: "[1,1048576]", Default: "60", Doc: "fabricsim: wire bytes of an ACK, NACK or CNP"},
		set: func(c *Config, x float64, _ []string) error { c.AckBytes = int(x); return nil }},
	{Key: confkey.Key{Name: "BUFFER_SIZE", Type: "number", Unit: "MB below 1024, else bytes", Range: "(0,1099511627776]", Default: "32", Doc: "switch shared buffer"},
		set: func(c *Config, x float64, _ []string) error {
			switch {
			case x < 1024: // SimAI.conf's MB, fractions allowed
				c.BufferBytes = int64(math.Round(x * (1 << 20)))
				if c.BufferBytes < 1 { // 1e-320 ran with no buffer at all
					return fmt.Errorf("%g MB rounds to 0 bytes", x)
				}
			case x != math.Trunc(x):
				return fmt.Errorf("%g bytes is not a whole number", x)
			default:
				c.BufferBytes = int64(x)
			}
			return nil
		}},
	{Key: confkey.Key{Name: "L2_ACK_INTERVAL", Type: "integer", Range: "[0,1048576]", Default: "1", Doc: "ACK every N data packets (0 is 1)"},
		set: func(c *Config, x float64, _ []string) error { c.AckInterval = max(int(x), 1); return nil }},
	{Key: confkey.Key{Name: "ACK_COALESCE", Type: "integer", Range: "[0,1048576]", Default: "0", Doc: "fabricsim, a fidelity trade for speed: 0 off; N acknowledges every N in-order packets of a queue pair (in place of L2_ACK_INTERVAL), its last one, and at once a packet its sender marked for an ACK (the BTH AckReq bit) because its window had no room for another"},
		set: func(c *Config, x float64, _ []string) error { c.AckCoalesce = int(x); return nil }},
	{Key: confkey.Key{Name: "HAS_WIN", Type: "flag", Default: "1", Doc: "a BDP window limits each queue pair besides its rate"},
		set: func(c *Config, x float64, _ []string) error { c.HasWin = x == 1; return nil }},
	{Key: confkey.Key{Name: "VAR_WIN", Type: "flag", Default: "1", Doc: "the window scales with rate / line rate"},
		set: func(c *Config, x float64, _ []string) error { c.VarWin = x == 1; return nil }},
	{Key: confkey.Key{Name: "QPS_PER_CONNECTION", Type: "integer", Range: "[1,64]", Default: "1", Doc: "queue pairs a flow is split over"},
		set: func(c *Config, x float64, _ []string) error { c.QPsPerConn = int(x); return nil }},
	{Key: confkey.Key{Name: "RTO_US", Type: "time", Unit: "us", Range: "[1,1e9]", Default: "1000", Doc: "fabricsim: go back N after this long without progress"},
		set: func(c *Config, x float64, _ []string) error { c.RTOPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "TRANSPORT", Type: "choice", Range: strings.Join(transportNames(), "|"), Default: "roce", Doc: transportDoc()},
		set: func(c *Config, x float64, _ []string) error { c.Transport = Transport(x); return nil }},
	{Key: confkey.Key{Name: "ROUTING", Type: "choice", Range: strings.Join(routingNames[:], "|"), Default: "ecmp", Doc: "fabricsim: per-flow ECMP, per-packet spraying, flowlets, or Spectrum-X adaptive routing"},
		set: func(c *Config, x float64, _ []string) error { c.Routing = Routing(x); return nil }},
	{Key: confkey.Key{Name: "ECMP_KEY", Type: "choice", Range: strings.Join(route.HashKeyNames[:], "|"), Default: "transfer", Doc: "fabricsim: what an ECMP hash is drawn for: each transfer (its own queue pair, as SimAI) or each connection (a GPU pair's channel: NCCL's one queue pair per connection, so all its transfers take one path), as flowsim-analytical's --ecmp-key"},
		set: func(c *Config, x float64, _ []string) error { c.ECMPKey = route.HashKey(x); return nil }},
	{Key: confkey.Key{Name: "FLOWLET_GAP_US", Type: "time", Unit: "us", Range: "[0.001,1e6]", Default: "5", Doc: "fabricsim, ROUTING flowlet: an idle gap that starts a new flowlet"},
		set: func(c *Config, x float64, _ []string) error { c.FlowletGapPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "ERROR_RATE_PER_LINK", Type: "number", Range: "[0,1)", Default: "0", Doc: "packet loss probability on every link"},
		set: func(c *Config, x float64, _ []string) error { c.ErrorRate = x; return nil }},
	{Key: confkey.Key{Name: "KMAX_MAP", Type: "map", Unit: "KB by link rate", Range: "[0,1073741824]", Default: "6 25000000000 400 50000000000 800 100000000000 1600 200000000000 1200 400000000000 3200 1600000000000 2400", Doc: "RED: mark every packet above this queue (n, then n pairs of rate_bps and value)"},
		set: func(c *Config, _ float64, v []string) (err error) {
			c.KMax, err = parseRateMap(v, "[0,1073741824]", "KB")
			return err
		}},
	{Key: confkey.Key{Name: "KMIN_MAP", Type: "map", Unit: "KB by link rate", Range: "[0,1073741824]", Default: "6 25000000000 100 50000000000 200 100000000000 400 200000000000 300 400000000000 800 1600000000000 600", Doc: "RED: start marking above this queue (at most KMAX_MAP at every rate)"},
		set: func(c *Config, _ float64, v []string) (err error) {
			c.KMin, err = parseRateMap(v, "[0,1073741824]", "KB")
			return err
		}},
	{Key: confkey.Key{Name: "PMAX_MAP", Type: "map", Unit: "probability by link rate", Range: "[0,1]", Default: "6 25000000000 0.2 50000000000 0.2 100000000000 0.2 200000000000 0.8 400000000000 0.2 1600000000000 0.2", Doc: "RED: marking probability at KMAX"},
		set: func(c *Config, _ float64, v []string) (err error) {
			c.PMax, err = parseRateMap(v, "[0,1]", "")
			return err
		}},
	{Key: confkey.Key{Name: "SIMULATOR_STOP_TIME", Type: "time", Unit: "ns", Range: "[0,inf)", Default: "0", Doc: "stop the run here (0: run to the end; above 1e15, which ps would overflow, too)"},
		set: func(c *Config, x float64, _ []string) error {
			if x > 1e15 {
				x = 0
			}
			c.StopPs = confkey.PsOf(x, "ns")
			if x > 0 && c.StopPs == 0 {
				// It read as 0, "run to the end": a time meant in seconds
				// (0.0001) ran the whole workload with no word.
				return fmt.Errorf("%g ns rounds to 0 ps, which means no stop; a bare value is in ns (or give a unit: 100us)", x)
			}
			return nil
		}},
	{Key: confkey.Key{Name: "LINK_DOWN", Type: "list", Unit: "time_ns node_a node_b", Default: "0 0 0", Doc: "fail the link between two nodes at a time (0 0 0: none)"}, set: setLinkDown},
	{Key: confkey.Key{Name: "MON_START", Type: "time", Unit: "us", Range: "[0,1e12]", Default: "0", Doc: "monitors (--monitor-dir) sample from here"},
		set: func(c *Config, x float64, _ []string) error { c.MonStartPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "MON_END", Type: "time", Unit: "us", Range: "[0,1e12]", Default: "20000", Doc: "and stop here"},
		set: func(c *Config, x float64, _ []string) error { c.MonEndPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "QP_MON_INTERVAL", Type: "time", Unit: "us", Range: "[0.001,1e12]", Default: "100", Doc: "rate and CNP monitor interval"},
		set: func(c *Config, x float64, _ []string) error { c.QPMonPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "QLEN_MON_INTERVAL", Type: "time", Unit: "us", Range: "[0.001,1e12]", Default: "10000", Doc: "queue length monitor interval"},
		set: func(c *Config, x float64, _ []string) error { c.QLenMonPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "BW_MON_INTERVAL", Type: "time", Unit: "us", Range: "[0.001,1e12]", Default: "10000", Doc: "host bandwidth monitor interval"},
		set: func(c *Config, x float64, _ []string) error { c.BWMonPs = confkey.PsOf(x, "us"); return nil }},
	{Key: confkey.Key{Name: "L2_BACK_TO_ZERO", Type: "off", Default: "0", Doc: "on NACK, go back to an L2_CHUNK_SIZE boundary"}},
	{Key: confkey.Key{Name: "GLOBAL_T", Type: "off", Default: "0", Doc: "one window for every queue pair, from the largest base RTT"}},
	{Key: confkey.Key{Name: "FLOW_FILE", Type: "ignored", Doc: "SimAI's flow input"}},
	{Key: confkey.Key{Name: "TRACE_FILE", Type: "ignored", Doc: "SimAI's trace node list"}},
	{Key: confkey.Key{Name: "TRACE_OUTPUT_FILE", Type: "ignored", Doc: "SimAI's packet trace"}},
	{Key: confkey.Key{Name: "FCT_OUTPUT_FILE", Type: "ignored", Doc: "use --simai-fct"}},
	{Key: confkey.Key{Name: "PFC_OUTPUT_FILE", Type: "ignored", Doc: "use --monitor-dir"}},
	{Key: confkey.Key{Name: "QLEN_MON_FILE", Type: "ignored", Doc: "use --monitor-dir"}},
	{Key: confkey.Key{Name: "BW_MON_FILE", Type: "ignored", Doc: "use --monitor-dir"}},
	{Key: confkey.Key{Name: "RATE_MON_FILE", Type: "ignored", Doc: "use --monitor-dir"}},
	{Key: confkey.Key{Name: "CNP_MON_FILE", Type: "ignored", Doc: "use --monitor-dir"}},
	{Key: confkey.Key{Name: "ENABLE_TRACE", Type: "ignored", Doc: "packet traces are not written"}},
	{Key: confkey.Key{Name: "ACK_HIGH_PRIO", Type: "ignored", Doc: "ACK, NACK and CNP always use queue 0"}},
	{Key: confkey.Key{Name: "L2_WAIT_FOR_ACK", Type: "ignored", Doc: "SimAI's stop-and-wait flag"}},
	{Key: confkey.Key{Name: "ECN_ENABLED", Type: "ignored", Doc: "see ENABLE_QCN"}},
	{Key: confkey.Key{Name: "KMIN", Type: "ignored", Doc: "use KMIN_MAP"}},
	{Key: confkey.Key{Name: "KMAX", Type: "ignored", Doc: "use KMAX_MAP"}},
	{Key: confkey.Key{Name: "PMAX", Type: "ignored", Doc: "use PMAX_MAP"}},
	{Key: confkey.Key{Name: "L2_CHUNK_SIZE", Type: "ignored", Doc: "the go-back granularity of L2_BACK_TO_ZERO 1, which is not implemented"}},
}

// confKey is a row of the table: its documentation and what it sets from
// the parsed value (x: the number, the flag as 0 or 1, the choice's
// index) or the raw values (maps, lists).
type confKey struct {
	confkey.Key
	set func(c *Config, x float64, v []string) error
}

func confKeyNamed(name string) *confKey {
	for i := range confKeys {
		if confKeys[i].Name == name {
			return &confKeys[i]
		}
	}
	return nil
}

// Schema lists every key flowsim-packet reads, pkg/cc's after its own and
// the ignored ones last.
func Schema() []confkey.Key {
	var out, ignored []confkey.Key
	for _, k := range confKeys {
		if k.Type == "ignored" {
			ignored = append(ignored, k.Key)
		} else {
			out = append(out, k.Key)
		}
	}
	return append(append(out, cc.Schema()...), ignored...)
}

// parse reads a key's values as its row says: one number in range (a
// whole one for an integer), a flag 0 or 1, a choice by name; maps and
// lists go to set as they are. A SimAI switch fabricsim does not model is
// accepted at 0 and refused at 1 rather than silently ignored.
func (k *confKey) parse(v []string) (float64, error) {
	switch k.Type {
	case "ignored":
		return 0, nil
	case "map", "list":
		return 0, nil
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("expected one value, got %d", len(v))
	}
	switch k.Type {
	case "choice":
		i, err := parseEnum[uint8](v[0], strings.Split(k.Range, "|"))
		return float64(i), err
	case "off":
		flag := confkey.Key{Name: k.Name, Type: "flag"}
		x, err := flag.Value(v[0])
		if err == nil && x == 1 {
			return 0, fmt.Errorf("1 (%s) is not implemented; use 0 as SimAI.conf ships", k.Doc)
		}
		return x, err
	}
	return k.Value(v[0]) // as every table reads a value
}

// setProfile sets the DCQCN keys to the named profile's values.
func setProfile(c *Config, x float64, _ []string) error {
	for _, kv := range cc.Profile(cc.ProfileNames()[int(x)]) {
		if err := c.applyCC(kv.Key, []string{kv.Value}); err != nil {
			return err
		}
	}
	return nil
}

// profileShadowed returns the first and last lines of the keys a file's
// profile sets when every one of them is given again in it (after the
// profile: before it is refused), 0, 0 otherwise or for SimAI's profile
// (the defaults, which default.conf restates). Such a profile has no
// effect: editing default.conf's to connectx once silently ran SimAI's.
func profileShadowed(prof string, seen map[string]int) (first, last int) {
	kvs := cc.Profile(prof)
	if len(kvs) == 0 || prof == cc.ProfileNames()[0] {
		return 0, 0
	}
	first = math.MaxInt
	for _, kv := range kvs {
		at, ok := seen[kv.Key]
		if !ok {
			return 0, 0
		}
		first, last = min(first, at), max(last, at)
	}
	return first, last
}

// profileKey is DCQCN_PROFILE's name, as keys are compared (dupKey).
const profileKey = "DCQCN_PROFILE"

// profileOverrides names a key the profile sets that a file gave before
// it, with its line (seen: key to line), "" if none: the profile would
// silently replace it.
func profileOverrides(seen map[string]int) string {
	for _, kv := range cc.Profile(cc.ProfileNames()[0]) { // every profile sets the same keys
		if at, ok := seen[kv.Key]; ok {
			return fmt.Sprintf("%s (line %d)", kv.Key, at)
		}
	}
	return ""
}

// positiveBytes refuses a KB value that rounds to 0 bytes, as
// portThresholds rounds it: a threshold of nothing is nonsense accepted.
func positiveBytes(kb float64) error {
	if math.Round(kb*1024) < 1 {
		return fmt.Errorf("%g KB rounds to 0 bytes", kb)
	}
	return nil
}

// setLinkDown reads LINK_DOWN's time and nodes. They must fit what the
// simulator keeps (a day in ps, an int32 node): past either they once
// wrapped around, onto another link or into the past.
func setLinkDown(c *Config, _ float64, v []string) error {
	if len(v) != 3 {
		return fmt.Errorf("expected <time_ns> <node_a> <node_b>")
	}
	var t, a, b int64
	for i, dst := range []*int64{&t, &a, &b} {
		limit := int64(math.MaxInt32)
		if i == 0 {
			limit = maxLinkDownNs
		}
		var err error
		if *dst, err = strconv.ParseInt(v[i], 10, 64); err != nil || *dst < 0 || *dst > limit {
			return fmt.Errorf("%q is not an integer from 0 to %d", v[i], limit)
		}
	}
	if t == 0 && a == 0 && b == 0 {
		return nil // SimAI's "no failure"
	}
	c.LinkDown = append(c.LinkDown, LinkDown{AtPs: t * 1000, A: int32(a), B: int32(b)})
	return nil
}
