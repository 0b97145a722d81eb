package config

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParseTarget checks that ParseTarget never panics, that every defect it
// reports is an *Error inside the file, and that every configuration it
// accepts survives Marshal and ParseTarget unchanged (and Marshal is stable).
// The seeds are the valid documents of the tests, a sample of the malformed
// corpus, and the committed corpus in testdata/fuzz/FuzzParseTarget.
func FuzzParseTarget(f *testing.F) {
	f.Add([]byte(exampleYAML))
	f.Add(defaultTargetYAML)
	f.Add([]byte(corpusBase))
	for _, name := range []string{"quoting", "aliases"} {
		f.Add([]byte(roundTripDocs[name]))
	}
	for i, c := range corpus() {
		if i%25 == 0 {
			f.Add([]byte(c.text))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data, ParseTarget, (*Target).Marshal)
	})
}

// checkParse is the property both configurations' fuzzers check: parse
// either accepts data, and then Marshal gives a document that parses to
// the same configuration and marshals to the same octets, or returns only
// defects that name this file and a line inside it.
func checkParse[C any](t *testing.T, data []byte, parse func(string, []byte) (*C, error), marshal func(*C) ([]byte, error)) {
	got, err := parse("fuzz.yaml", data)
	if err != nil {
		if got != nil {
			t.Fatalf("parse returned both a configuration and %v", err)
		}
		lines := len(lineEnds(data)) + 1 // + 1: a node may sit after a final line break
		for _, e := range defects(t, err) {
			if e.File != "fuzz.yaml" || e.Line < 0 || e.Line > lines || e.Msg == "" {
				t.Fatalf("defect %#v is outside the file of %d lines", e, lines)
			}
		}
		return
	}
	out, err := marshal(got)
	if err != nil {
		t.Fatalf("Marshal of an accepted configuration: %v", err)
	}
	again, err := parse("marshaled.yaml", out)
	if err != nil {
		t.Fatalf("Marshal output rejected: %v\ninput:\n%s\noutput:\n%s", err, data, out)
	}
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("round trip changed the configuration:\n%#v\n%#v\ninput:\n%s\noutput:\n%s", got, again, data, out)
	}
	if out2, err := marshal(again); err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("Marshal is not stable (%v):\n%s\n---\n%s", err, out, out2)
	}
}
