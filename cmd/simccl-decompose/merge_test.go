package main

import (
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Two jobs of 200 notes each: the mix keeps 255 of them, each naming its
// job, and a last one saying 145 more are in the jobs' own streams (a
// stream holds at most 256); a text at the limit is cut to fit.
func TestMergedNotesBounded(t *testing.T) {
	var ins []*mergeInput
	for _, name := range []string{"a", "b"} {
		in := &mergeInput{job: stream.Job{Name: name}}
		for range 200 {
			in.notes = append(in.notes, &stream.Note{Producer: "p", Text: strings.Repeat("x", stream.MaxNoteBytes)})
		}
		ins = append(ins, in)
	}
	got := mergedNotes(ins)
	if len(got) != stream.MaxNotes {
		t.Fatalf("%d notes, want %d", len(got), stream.MaxNotes)
	}
	if n := got[0]; n.Producer != "p" || !strings.HasPrefix(n.Text, "job a: xxx") || len(n.Text) != stream.MaxNoteBytes {
		t.Errorf("first note %q... (%d bytes)", n.Text[:12], len(n.Text))
	}
	if n := got[200]; !strings.HasPrefix(n.Text, "job b: ") {
		t.Errorf("note 200 %q...", n.Text[:12])
	}
	if last := got[len(got)-1].Text; !strings.Contains(last, "145 more notes") {
		t.Errorf("last note %q", last)
	}
}
