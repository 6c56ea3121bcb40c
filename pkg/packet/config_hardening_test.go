package packet

import (
	"path/filepath"
	"strings"
	"testing"
)

// Nonsense the config reader once accepted (issue 31): each must be
// refused with the key, the way the user wrote it, in the error.
func TestConfigRefusesNonsense(t *testing.T) {
	for kv, want := range map[string]string{
		// RED maps: NaN or Inf rates and thresholds, probabilities outside [0,1].
		"KMAX_MAP=1 400000000000 NaN":     "is not a positive rate and a value",
		"KMAX_MAP=1 400000000000 Inf":     "is not a positive rate and a value",
		"KMIN_MAP=1 NaN 100":              "is not a positive rate and a value",
		"KMIN_MAP=1 +Inf 100":             "is not a positive rate and a value",
		"KMAX_MAP=1 400000000000 1e300":   "outside [0,1073741824]",
		"PMAX_MAP=1 400000000000 NaN":     "is not a positive rate and a value",
		"PMAX_MAP=1 400000000000 1.5":     "1.5 is outside [0,1]",
		"PMAX_MAP=2 1e9 0.2 1e10 -0.1":    "-0.1 is outside [0,1]",
		"KMAX_MAP=1 400000000000 1_600":   "is not a positive rate and a value",
		"KMAX_MAP=1 400_000_000_000 1600": "is not a positive rate and a value",
		// Go's underscore digits, hex floats and friends are not numbers here.
		"CC_MODE=1_0":             `"1_0" is not a number`,
		"PAUSE_TIME=1_0":          "PAUSE_TIME",
		"BUFFER_SIZE=1_0":         `"1_0" is not a number`,
		"QPS_PER_CONNECTION=1_0":  `"1_0" is not a number`,
		"RATE_AI=1_0":             "RATE_AI",
		"CC_MODE=0x1p3":           "is not a number",
		"ERROR_RATE_PER_LINK=NaN": "is not a number",
		// Sizes that round to nothing.
		"BUFFER_SIZE=1e-320":      "rounds to 0 bytes",
		"BUFFER_SIZE=1e-9":        "rounds to 0 bytes",
		"BUFFER_SIZE=0":           "outside (0,",
		"PFC_PORT_LOW_KB=1e-320":  "rounds to 0 bytes",
		"PFC_PORT_HIGH_KB=0.0001": "rounds to 0 bytes",
		// A choice outside its list.
		"ECMP_KEY=foo":        "expected transfer or connection",
		"ECMP_KEY=Connection": "expected transfer or connection",
	} {
		c := DefaultConfig()
		err := c.SetKV(kv)
		if err == nil {
			err = c.Validate()
		}
		key, _, _ := strings.Cut(kv, "=")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s with %q", kv, err, key, want)
		}
	}
	// KMIN above KMAX at one rate, whichever map is read first.
	for _, conf := range []string{
		"KMIN_MAP 1 100000000000 2000\nKMAX_MAP 1 100000000000 1600\n",
		"KMAX_MAP 2 25000000000 400 100000000000 1600\nKMIN_MAP 2 25000000000 500 100000000000 400\n",
	} {
		c := DefaultConfig()
		err := c.Read(strings.NewReader(conf), "red.conf")
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "KMIN_MAP") || !strings.Contains(err.Error(), "above KMAX_MAP") {
			t.Errorf("%q: %v", conf, err)
		}
	}
	// Equal thresholds are a step marker (DCTCP's): valid.
	c := DefaultConfig()
	if err := c.Read(strings.NewReader("KMIN_MAP 1 1e9 100\nKMAX_MAP 1 1e9 100\nPMAX_MAP 1 1e9 1\n"), "step.conf"); err != nil || c.Validate() != nil {
		t.Errorf("KMIN = KMAX refused: %v %v", err, c.Validate())
	}
}

// A key given twice, in a file or in --set, is refused naming both; a
// list key (LINK_DOWN) adds up and may repeat.
func TestConfigDuplicateKeys(t *testing.T) {
	c := DefaultConfig()
	err := c.Read(strings.NewReader("CC_MODE 1\n# comment\nBUFFER_SIZE 16\n\nCC_MODE 3\n"), "dup.conf")
	if err == nil || !strings.Contains(err.Error(), "dup.conf: line 5, key CC_MODE") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("duplicate in a file: %v", err)
	}
	c = DefaultConfig()
	err = c.Read(strings.NewReader("RATE_AI 5Gbps\nrate_ai 6Gbps\n"), "dup.conf")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("duplicate pkg/cc key in a file: %v", err)
	}
	c = DefaultConfig()
	err = c.SetKVs([]string{"CC_MODE=1", "BUFFER_SIZE=4", "CC_MODE=8"})
	if err == nil || !strings.Contains(err.Error(), "CC_MODE=1") || !strings.Contains(err.Error(), "CC_MODE=8") {
		t.Errorf("duplicate --set: %v", err)
	}
	c = DefaultConfig()
	if err := c.Read(strings.NewReader("LINK_DOWN 1000 3 18\nLINK_DOWN 2000 4 19\n"), "ld.conf"); err != nil || len(c.LinkDown) != 2 {
		t.Errorf("two LINK_DOWN lines: %v, %d failures", err, len(c.LinkDown))
	}
	if err := c.SetKVs([]string{"LINK_DOWN=3000 5 20", "LINK_DOWN=4000 6 21", "CC_MODE=8"}); err != nil || len(c.LinkDown) != 4 {
		t.Errorf("two --set LINK_DOWN: %v, %d failures", err, len(c.LinkDown))
	}
	// --set overrides the file's key: that is what it is for.
	c = DefaultConfig()
	if err := c.Read(strings.NewReader("CC_MODE 1\n"), "one.conf"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetKVs([]string{"CC_MODE=8"}); err != nil || c.CCMode != 8 {
		t.Errorf("--set over the file: %v, CC_MODE %d", err, c.CCMode)
	}
}

// Every conf file fabricsim ships or refers to still loads.
func TestConfigShippedFilesLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/conf/*.conf")
	refs, _ := filepath.Glob("../../../shared/refs/simai/*.conf")
	if len(files) == 0 {
		t.Fatal("no example conf files")
	}
	for _, name := range append(files, refs...) {
		c, err := readConfFile(t, name)
		if err == nil {
			err = c.Validate()
		}
		if err != nil || len(c.Warnings()) != 0 {
			t.Errorf("%s: %v %v", name, err, c.Warnings())
		}
	}
}

// PFC_PORT_* under PFC_MODE priority are valid but do nothing: warn.
func TestConfigPortKeysWarn(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKVs([]string{"PFC_PORT_HIGH_KB=200"}); err != nil || c.Validate() != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "ignored under PFC_MODE priority") {
		t.Errorf("warnings %q", w)
	}
	if err := c.SetKVs([]string{"PFC_MODE=port"}); err != nil || c.Validate() != nil || len(c.Warnings()) != 0 {
		t.Errorf("PFC_MODE port: %v %q", err, c.Warnings())
	}
}
