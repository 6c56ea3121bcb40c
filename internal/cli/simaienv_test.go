package cli

import (
	"slices"
	"testing"
)

func TestSimAIEnv(t *testing.T) {
	t.Setenv("AS_SEND_LAT", "3")
	t.Setenv("AS_NVLS_ENABLE", "1")
	t.Setenv("AS_RING_CHANNELS", "1 2") // not one field: left out, so the record splits back
	t.Setenv("AS_API_TOKEN", "s3cr3t")  // not SimAI's: never written to a shared file
	if got, want := SimAIEnv(), "AS_NVLS_ENABLE=1 AS_SEND_LAT=3"; got != want {
		t.Errorf("SimAIEnv() = %q, want %q", got, want)
	}
	rec := "AS_GPU_TYPE=A100 AS_NVLS_ENABLE=1 AS_PXN_ENABLE=1 AS_SEND_LAT=3"
	// Set here: not missed; not read: not missed.
	got := SimAIEnvMissed(rec, "AS_NVLS_ENABLE", "AS_GPU_TYPE", "AS_RING_CHANNELS")
	if want := []string{"AS_GPU_TYPE=A100"}; !slices.Equal(got, want) {
		t.Errorf("SimAIEnvMissed = %q, want %q", got, want)
	}
	if got := SimAIEnvMissed("", "AS_SEND_LAT"); got != nil {
		t.Errorf("nothing recorded: %q", got)
	}
}
