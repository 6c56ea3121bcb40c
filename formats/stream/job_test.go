package stream

import (
	"bytes"
	"strings"
	"testing"
)

// A job record reads back as written; bad values are named by field.
func TestJobRecord(t *testing.T) {
	read := func(body any) (*Job, error) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Record(KindJob, body); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(&buf, "s")
		if err != nil {
			t.Fatal(err)
		}
		if k, err := r.Next(); err != nil || k != KindJob {
			t.Fatalf("next: %q, %v", k, err)
		}
		return r.Job()
	}
	want := Job{Name: "train-b", StartPs: 1e9, FirstGroup: 3, FirstCollective: 40, FirstFlow: 500}
	got, err := read(&want)
	if err != nil || *got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"name": "", "start_ps": 0}, "name"},
		{map[string]any{"start_ps": 0}, "name"},
		{map[string]any{"name": "a", "start_ps": -1}, "start_ps"},
		{map[string]any{"name": "a", "start_ps": int64(2e15)}, "start_ps"},
		{map[string]any{"name": "a", "first_flow": -3}, "first_flow"},
		{map[string]any{"name": strings.Repeat("x", 257)}, "name"},
	} {
		if _, err := read(c.body); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%v: %v, want an error naming %s", c.body, err, c.field)
		}
	}
	// Unknown keys are skipped.
	if j, err := read(map[string]any{"name": "a", "later": 1}); err != nil || j.Name != "a" {
		t.Errorf("unknown key: %+v, %v", j, err)
	}
}

// A note record round-trips; an empty or oversized text, or an oversized
// producer, is refused naming the field.
func TestNoteRecord(t *testing.T) {
	read := func(body any) (*Note, error) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Record(KindNote, body); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(&buf, "s")
		if err != nil {
			t.Fatal(err)
		}
		if k, err := r.Next(); err != nil || k != KindNote {
			t.Fatalf("next: %q, %v", k, err)
		}
		return r.Note()
	}
	want := Note{Producer: "simccl-decompose", Text: "554 ctrl_deps dropped"}
	if got, err := read(&want); err != nil || *got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"producer": "p"}, "field text"},
		{map[string]any{"text": ""}, "field text"},
		{map[string]any{"text": strings.Repeat("x", MaxNoteBytes+1)}, "field text"},
		{map[string]any{"text": "t", "producer": strings.Repeat("x", 257)}, "field producer"},
		{map[string]any{"text": 3}, "field text"},
	} {
		if _, err := read(c.body); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%v: %v, want an error naming %s", c.body, err, c.field)
		}
	}
}
