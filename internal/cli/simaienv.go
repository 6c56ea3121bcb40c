package cli

import (
	"os"
	"slices"
	"strings"
)

// SimAIEnvNames is SimAI's variables README's table documents, the only
// AS_* variables SimAIEnv records: any other may hold anything (a token),
// and the topology and the streams made from it are shared files.
var SimAIEnvNames = []string{
	"AS_GPU_TYPE", "AS_NET_BW", "AS_NV_CHANNELS", "AS_NVLS_ENABLE",
	"AS_PXN_ENABLE", "AS_RING_CHANNELS", "AS_SEND_LAT",
}

// SimAIEnv is SimAI's variables (SimAIEnvNames) set in this process's
// environment, as NAME=value sorted by name and joined by spaces. topogen
// records them in the topology's params (topo.ParamSimAIEnv): SimAI reads
// them in its one process, and a user carrying its command line over as
// "AS_NVLS_ENABLE=1 topogen ... | simccl-decompose ..." sets them for
// topogen alone, which reads none, so the program that does can say so.
func SimAIEnv() string {
	var set []string
	for _, name := range SimAIEnvNames {
		v, ok := os.LookupEnv(name)
		if ok && !strings.ContainsAny(v, " \t\n") {
			set = append(set, name+"="+v)
		}
	}
	slices.Sort(set)
	return strings.Join(set, " ")
}

// SimAIEnvMissed is, of the variables names, each that recorded (as
// SimAIEnv writes it) sets and this process's environment lacks, as
// NAME=value.
func SimAIEnvMissed(recorded string, names ...string) []string {
	var missed []string
	for _, kv := range strings.Fields(recorded) {
		name, _, _ := strings.Cut(kv, "=")
		if _, here := os.LookupEnv(name); slices.Contains(names, name) && !here {
			missed = append(missed, kv)
		}
	}
	return missed
}
