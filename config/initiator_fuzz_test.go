package config

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseInitiator checks that ParseInitiator never panics, that every
// defect it reports is an *Error inside the file, and that every
// configuration it accepts survives Marshal and ParseInitiator unchanged (and
// Marshal is stable). The seeds are the valid documents of the tests, a
// sample of the malformed corpus, and the committed corpus in
// testdata/fuzz/FuzzParseInitiator.
func FuzzParseInitiator(f *testing.F) {
	f.Add([]byte(initiatorExampleYAML))
	f.Add(defaultInitiatorYAML)
	f.Add([]byte(initiatorCorpusBase))
	for _, name := range []string{"quoting", "sctp-only", "durations", "aliases"} {
		f.Add([]byte(initiatorRoundTripDocs[name]))
	}
	for i, c := range initiatorCorpus() {
		if i%25 == 0 {
			f.Add([]byte(c.text))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data, ParseInitiator, (*Initiator).Marshal)
	})
}

// FuzzInitiatorOverride checks that Override never panics, that a refused
// value names its flag and leaves the configuration as it was, and that an
// accepted one yields a configuration Marshal and ParseInitiator carry over
// unchanged.
func FuzzInitiatorOverride(f *testing.F) {
	for i, name := range initiatorFlagNames() {
		for _, v := range []string{"", "0", "1", "32", "true", "1MiB", "30s", "0s", "debug", "iqn.2026-11.io.ddpstore:x", "a: b", "[1]", "*x", "1 GiB"} {
			f.Add(uint8(i), v)
		}
		f.Add(uint8(i), name)
	}
	names := initiatorFlagNames()
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := names[int(which)%len(names)]
		c := DefaultInitiator()
		if which >= 128 { // a configuration whose targets do not use tcp, with keepalive off
			c.Targets[0].Transport = TransportSCTP
			c.NOP.Interval = 0
		}
		before := *c
		if err := c.Override(name, value); err != nil {
			if !strings.HasPrefix(err.Error(), "--"+name+": ") {
				t.Fatalf("Override(%s, %q) = %v: the error does not name the flag", name, value, err)
			}
			if !reflect.DeepEqual(c, &before) {
				t.Fatalf("Override(%s, %q) failed and changed the configuration", name, value)
			}
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal after Override(%s, %q): %v", name, value, err)
		}
		again, err := ParseInitiator("overridden.yaml", out)
		if err != nil {
			t.Fatalf("Override(%s, %q) produced a configuration the file rejects: %v\n%s", name, value, err, out)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("Override(%s, %q): round trip changed the configuration:\n%#v\n%#v\n%s", name, value, c, again, out)
		}
	})
}
