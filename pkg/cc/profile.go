package cc

// A DCQCN profile is a set of values for the DCQCN keys, chosen by name
// (flowsim-packet's DCQCN_PROFILE). "simai" is SimAI.conf's (every key's
// default); "connectx" is an NVIDIA ConnectX NIC's firmware defaults, as
// `mstconfig -e query` lists them in its Default column (ConnectX-4 Lx
// and later: k8snetworkplumbingwg/sriov-network-operator's
// pkg/vendors/mellanox/mellanox_test.go fixture; the same values in the
// other public dumps found, but for MIN_TIME_BETWEEN_CNPS) and NVIDIA's
// "DCQCN CC Parameters" page (DOCA docs) describes them:
var connectX = []KeyValue{
	{"RP_TIMER", "300"},               // RPG_TIME_RESET 300 µs
	{"RPG_BYTE_RESET", "32767"},       // RPG_BYTE_RESET 32767 bytes (mstflint: "given in Bytes", 0 disables)
	{"FAST_RECOVERY_TIMES", "1"},      // RPG_THRESHOLD 1
	{"RATE_AI", "5Mb/s"},              // RPG_AI_RATE 5 Mb/s
	{"RATE_HAI", "50Mb/s"},            // RPG_HAI_RATE 50 Mb/s
	{"MIN_RATE", "1Mb/s"},             // RPG_MIN_RATE 1 Mb/s
	{"EWMA_GAIN", "0.0048828125"},     // DCE_TCP_G 1019: alpha = (1019/1024)·alpha + 5/1024
	{"ALPHA_RESUME_INTERVAL", "1"},    // DCE_TCP_RTT 1 µs
	{"RATE_DECREASE_INTERVAL", "4"},   // RATE_REDUCE_MONITOR_PERIOD 4 µs
	{"CLAMP_TARGET_RATE", "0"},        // CLAMP_TGT_RATE 0 (CLAMP_TGT_RATE_AFTER_TIME_INC 1 is the model's rule)
	{"RATE_ON_FIRST_CNP", "1"},        // RATE_TO_SET_ON_FIRST_CNP 0: no extra drop
	{"INITIAL_ALPHA", "0.9990234375"}, // INITIAL_ALPHA_VALUE 1023/1024
	{"MIN_TIME_BETWEEN_CNPS", "4"},    // 4 µs in most dumps (one 2, a ConnectX-4's 0); mstflint: per port ("from the port"), default 0; modelled per pair
}

// The NIC's RPG_GD 11 (alpha/2 a cut) and RPG_MIN_DEC_FAC 50 (no cut
// below half the rate, which alpha <= 1 never asks) are the model's
// formula as it is.

// KeyValue is one key's value as a file writes it.
type KeyValue struct{ Key, Value string }

// ProfileNames lists the DCQCN profiles, the default first.
func ProfileNames() []string { return []string{"simai", "connectx"} }

// Profile returns what the named profile sets (ProfileNames' order), nil
// for a name it does not know. Every profile sets the same keys, so that
// a later one replaces all of an earlier one's.
func Profile(name string) []KeyValue {
	switch name {
	case "connectx":
		return connectX
	case "simai":
		out := make([]KeyValue, len(connectX))
		for i, kv := range connectX {
			out[i] = KeyValue{kv.Key, keyNamed(kv.Key).Default}
		}
		return out
	}
	return nil
}
