package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// exampleYAML is the example of issue 5 and the package brief, with CHAP
// secrets of the 12 octets RFC 7143 requires (the brief's "s" and "r" are
// rejected as too short, as they must be).
const exampleYAML = `portals:
  - listen: 127.0.0.1:3260
    transport: tcp            # tcp (default) | sctp | sctp-udp
    mpa: {revision: 2, markers: false, crc: true}
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    alias: disk1              # optional
    luns:
      - {id: 0, path: /var/lib/ddpstore/disk1.img, size: 1GiB}
      - {id: 1, memory: 256MiB}
      - {id: 2, path: /dev/sdb, readonly: true}
    initiators: [iqn.2026-11.io.ddpstore:host1]   # empty: anyone
    chap: {user: u, secret: initiator-secret, mutual_user: t, mutual_secret: target-secret}
discovery_chap: {user: u, secret: discovery-secret}   # optional
limits: {max_sessions: 64, queue_depth: 128}
log: {level: info, format: text}
`

func exampleTarget() *Target {
	return &Target{
		Portals: []Portal{{Listen: "127.0.0.1:3260", Transport: "tcp", MPA: MPA{Revision: 2, Markers: false, CRC: true}}},
		Targets: []TargetDef{{
			Name:  "iqn.2026-11.io.ddpstore:disk1",
			Alias: "disk1",
			LUNs: []LUN{
				{ID: 0, Path: "/var/lib/ddpstore/disk1.img", Size: GiB},
				{ID: 1, Memory: 256 * MiB},
				{ID: 2, Path: "/dev/sdb", ReadOnly: true},
			},
			Initiators: []string{"iqn.2026-11.io.ddpstore:host1"},
			CHAP:       &CHAP{User: "u", Secret: "initiator-secret", MutualUser: "t", MutualSecret: "target-secret"},
		}},
		DiscoveryCHAP: &CHAP{User: "u", Secret: "discovery-secret"},
		Limits:        DefaultLimits(),
		Log:           Log{Level: "info", Format: "text"},
		Control:       DefaultControl(),
		State:         State{Dir: DefaultStateDir},
	}
}

func mustParse(t *testing.T, name, doc string) *Target {
	t.Helper()
	got, err := ParseTarget(name, []byte(doc))
	if err != nil {
		t.Fatalf("ParseTarget(%s): %v", name, err)
	}
	return got
}

// defects returns the *Error values of a ParseTarget error.
func defects(t *testing.T, err error) []*Error {
	t.Helper()
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out []*Error
	for _, e := range list {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("defect %v is a %T, not a *config.Error", e, e)
		}
		out = append(out, ce)
	}
	return out
}

func TestParseTargetExample(t *testing.T) {
	got := mustParse(t, "example.yaml", exampleYAML)
	if want := exampleTarget(); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTarget(example) =\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseTargetDefaults(t *testing.T) {
	got := mustParse(t, "min.yaml", `
targets:
  - name: iqn.2026-11.io.ddpstore:min
    luns:
      - id: 7
        path: /srv/min.img
  - name: eui.02004567a425678d
    luns: [{id: 0, memory: 4KiB}]
    initiators: []
`)
	want := &Target{
		Portals: []Portal{{Listen: DefaultListen, Transport: TransportTCP, MPA: DefaultMPA()}},
		Targets: []TargetDef{
			{Name: "iqn.2026-11.io.ddpstore:min", LUNs: []LUN{{ID: 7, Path: "/srv/min.img"}}},
			{Name: "eui.02004567a425678d", LUNs: []LUN{{ID: 0, Memory: 4 * KiB}}},
		},
		Limits:  DefaultLimits(),
		Log:     Log{Level: "info", Format: "text"},
		Control: Control{Socket: "/run/ddpstore/ddptarget.sock"},
		State:   State{Dir: DefaultStateDir},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %#v\nwant %#v", got, want)
	}
	if DefaultMPA() != (MPA{Revision: 2, Markers: false, CRC: true}) || DefaultLimits() != (Limits{64, 128, 16, 4, 15 * time.Second}) || DefaultLog() != (Log{"info", "text"}) {
		t.Errorf("defaults changed: %+v %+v %+v", DefaultMPA(), DefaultLimits(), DefaultLog())
	}

	// Partial sections keep the defaults of the fields they leave out;
	// an SCTP portal gets the default MPA options, which it does not use.
	got = mustParse(t, "partial.yaml", `
portals:
  - {listen: "[::1]:3260", transport: sctp-udp}
  - {listen: ":3261", mpa: {revision: 1}}
  - {listen: ":3262", mpa: {}}
targets: [{name: "naa.52004567ba64678d", luns: [{id: 0, memory: 1MiB}]}]
limits: {queue_depth: 32}
log: {format: json}
`)
	wantPortals := []Portal{
		{Listen: "[::1]:3260", Transport: TransportSCTPUDP, MPA: DefaultMPA()},
		{Listen: ":3261", Transport: TransportTCP, MPA: MPA{Revision: 1, CRC: true}},
		{Listen: ":3262", Transport: TransportTCP, MPA: DefaultMPA()},
	}
	if !reflect.DeepEqual(got.Portals, wantPortals) {
		t.Errorf("portals = %+v, want %+v", got.Portals, wantPortals)
	}
	if got.Limits != (Limits{MaxSessions: 64, QueueDepth: 32, MaxLoggingIn: 16, MaxLoggingInPerAddress: 4, LoginTimeout: 15 * time.Second}) || got.Log != (Log{Level: "info", Format: "json"}) {
		t.Errorf("limits %+v log %+v: defaults not kept", got.Limits, got.Log)
	}
}

// TestParseImmediateData: immediate_data is Yes unless a target says
// false, and says so per target.
func TestParseImmediateData(t *testing.T) {
	doc := "targets:\n" +
		"  - {name: iqn.2026-11.io.x:a, luns: [{id: 0, memory: 1MiB}]}\n" +
		"  - {name: iqn.2026-11.io.x:b, luns: [{id: 0, memory: 1MiB}], immediate_data: false}\n" +
		"  - {name: iqn.2026-11.io.x:c, luns: [{id: 0, memory: 1MiB}], immediate_data: true}\n"
	cfg, err := ParseTarget("imm.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false} {
		if got := cfg.Targets[i].NoImmediateData; got != want {
			t.Errorf("targets[%d]: NoImmediateData %v, want %v", i, got, want)
		}
	}
}

func TestDefaultTarget(t *testing.T) {
	got := DefaultTarget()
	want := &Target{
		Portals: []Portal{{Listen: "127.0.0.1:3260", Transport: "tcp", MPA: DefaultMPA()}},
		Targets: []TargetDef{{Name: "iqn.2026-11.io.ddpstore:default", LUNs: []LUN{{ID: 0, Memory: GiB}}}},
		Limits:  DefaultLimits(),
		Log:     DefaultLog(),
		Control: DefaultControl(),
		State:   State{Dir: DefaultStateDir},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultTarget() = %#v, want %#v", got, want)
	}
	got.Targets[0].LUNs[0].Memory = 1
	if DefaultTarget().Targets[0].LUNs[0].Memory != GiB {
		t.Errorf("DefaultTarget shares state between calls")
	}
}

// roundTripDocs are accepted configurations exercising every field and the
// strings YAML would misread if Marshal did not quote them.
var roundTripDocs = map[string]string{
	"example": exampleYAML,
	"default": string(defaultTargetYAML),
	"quoting": `
portals:
  - {listen: "[fe80::1%eth0]:3260", transport: sctp}
  - {listen: ":3260", mpa: {revision: 1, markers: true, crc: false}}
  - {listen: "storage.example.com:3261", transport: sctp-udp}
targets:
  - name: iqn.2026-11.io.ddpstore:quoting
    alias: "yes"
    luns:
      - {id: 0, path: "/srv/a: b, {c} [d]", size: 1.5GiB}
      - {id: 1, path: "/srv/#not a comment", readonly: true}
      - {id: 16383, path: "/srv/ünïcode ~ null", size: 1048577KiB}
      - {id: 3, path: "/srv/'quoted' \"too\"", size: 0x200}
      - {id: 4, memory: 9223372036854775296}
    initiators: [eui.02004567a425678d, naa.62004567ba64678d0123456789abcdef]
    chap: {user: "true", secret: "123456789012345", mutual_user: "0x1F", mutual_secret: '- a: b, {c} [d] #e'}
  - name: "iqn.2026-11.io.ddpstore:null"
    alias: ~x
    luns: [{id: 0, memory: 1TiB, readonly: false}]
    chap: {user: "null", secret: "   spaces   around   "}
  - name: iqn.2026-11.io.ddpstore:dates
    alias: 2026-11-01
    luns:
      - {id: 0, path: "/srv/- x: [y] {z} 'q' \"dq\" \\ back", size: 1GiB}
      - {id: 1, path: "/srv/ trailing ", size: 1GiB}
      - id: 2
        path: /srv/word0 word1 word2 word3 word4 word5 word6 word7 word8 word9 word10 word11 word12 word13 word14 word15 word16 word17 word18 word19 word20
    chap: {user: 2026-11-01, secret: 2026-11-01T10:00:00Z}
discovery_chap: {user: "1.5", secret: ".inf.inf.inf.inf", mutual_user: "@x", mutual_secret: "*not-an-alias*"}
limits: {max_sessions: 65535, queue_depth: 1}
log: {level: trace, format: json}
`,
	"aliases": `
x-shared: &chap {user: shared, secret: shared-secret-1}
targets:
  - name: iqn.2026-11.io.ddpstore:a
    luns: [{id: 0, memory: &m 64MiB}]
    chap: *chap
  - name: iqn.2026-11.io.ddpstore:b
    luns: [{id: 0, memory: *m}]
    chap: *chap
`,
}

func TestMarshalRoundTrip(t *testing.T) {
	docs := maps.Clone(roundTripDocs)
	// x-shared is not a field: the anchors must live inside fields.
	docs["aliases"] = strings.Replace(docs["aliases"], "x-shared: &chap {user: shared, secret: shared-secret-1}\n", "", 1)
	docs["aliases"] = strings.Replace(docs["aliases"], "    chap: *chap\n", "    chap: &chap {user: shared, secret: shared-secret-1}\n", 1)
	checkRoundTrip(t, docs, mustParse)
}

// checkRoundTrip parses each document, marshals it, and checks that the
// result parses to the same configuration and marshals to the same text.
func checkRoundTrip[T interface{ Marshal() ([]byte, error) }](t *testing.T, docs map[string]string, parse func(t *testing.T, name, doc string) T) {
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			first := parse(t, name+".yaml", doc)
			out, err := first.Marshal()
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			second := parse(t, name+"-marshaled.yaml", string(out))
			if !reflect.DeepEqual(first, second) {
				t.Errorf("round trip changed the configuration:\nfirst  %#v\nsecond %#v\nYAML:\n%s", first, second, out)
			}
			again, err := second.Marshal()
			if err != nil || string(again) != string(out) {
				t.Errorf("Marshal is not stable:\n%s\n---\n%s", out, again)
			}
		})
	}
}

func TestMarshalOutput(t *testing.T) {
	out, err := DefaultTarget().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `# ddptarget configuration, every default spelled out

portals:
  - listen: 127.0.0.1:3260
    transport: tcp
    mpa: {revision: 2, markers: false, crc: true}
targets:
  - name: iqn.2026-11.io.ddpstore:default
    luns:
      - {id: 0, memory: 1GiB}
limits: {max_sessions: 64, queue_depth: 128, max_logging_in: 16, max_logging_in_per_address: 4, login_timeout: 15s}
log: {level: info, format: text}
control: {socket: /run/ddpstore/ddptarget.sock}
state: {dir: /var/lib/ddpstore}
`
	if string(out) != want {
		t.Errorf("Marshal(DefaultTarget()) =\n%s\nwant\n%s", out, want)
	}
}

func TestLoadTarget(t *testing.T) {
	checkLoad(t, LoadTarget, exampleYAML, exampleTarget(),
		"targets:\n  - name: x\n    luns: [{id: 0, memory: 1MiB}]\n", ":2: targets[0].name: ")
}

// checkLoad checks a Load function: a good file gives want; a bad one an
// error that starts with its path and badAt (":line: path: "); a missing
// one os.ErrNotExist; one over the size limit a size error.
func checkLoad[T any](t *testing.T, load func(string) (T, error), good string, want T, bad, badAt string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := load(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("load(good) = %+v, %v", got, err)
	}
	badPath := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badPath, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(badPath); err == nil || !strings.HasPrefix(err.Error(), badPath+badAt) {
		t.Errorf("load(bad) = %v, want an error starting %s%s", err, badPath, badAt)
	}
	if _, err := load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("load(missing) = %v, want os.ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(big); err == nil || !strings.Contains(err.Error(), "larger than 16MiB") {
		t.Errorf("load(big) = %v, want a size error", err)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "disk.yaml", Line: 12, Path: "targets[0].luns[1].size", Msg: `"12QB" is not a size`}, `disk.yaml:12: targets[0].luns[1].size: "12QB" is not a size`},
		{Error{File: "disk.yaml", Line: 12, Column: 30, Path: "a", Msg: "m"}, "disk.yaml:12:30: a: m"},
		{Error{File: "disk.yaml", Line: 1, Msg: "the file is empty"}, "disk.yaml:1: the file is empty"},
		{Error{File: "disk.yaml", Msg: "and 3 more errors"}, "disk.yaml: and 3 more errors"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}

	// The brief's own example message, from a real parse; block style has no column.
	_, err := ParseTarget("disk.yaml", []byte(`targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    luns:
      - id: 0
        memory: 1GiB
      - id: 1
        path: /srv/disk.img
        size: 12QB
`))
	want := `disk.yaml:8: targets[0].luns[1].size: "12QB" is not a size (use a number with KiB, MiB, GiB or TiB)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestAllErrorsSorted checks that every defect is reported, in file order,
// even those found by cross-checks after the walk.
func TestAllErrorsSorted(t *testing.T) {
	doc := `log: {level: loud}
targets:
  - name: iqn.2026-11.io.ddpstore:a
    chap: {user: u, secret: same-secret-12, mutual_user: t, mutual_secret: other-secret-12}
    luns:
      - {id: 0, memory: 1000}
      - {id: 0, memory: 1MiB, colour: red}
  - name: iqn.2026-11.io.ddpstore:a
    chap: {user: u, secret: other-secret-12}
    luns: []
limits: {max_sessions: 0}
`
	_, err := ParseTarget("all.yaml", []byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	checkAllDefects(t, err, []string{
		"all.yaml:1:14: log.level",
		"all.yaml:4:76: targets[0].chap.mutual_secret",
		"all.yaml:6:25: targets[0].luns[0].memory",
		"all.yaml:7:14: targets[0].luns[1].id",
		"all.yaml:7:31: targets[0].luns[1]",
		"all.yaml:8: targets[1].name",
		"all.yaml:10:11: targets[1].luns",
		"all.yaml:11:24: limits.max_sessions",
	})
}

// checkAllDefects checks that err lists exactly the defects want names, as
// file:line[:column]: path, in order, and that no message shows one of the
// secrets the documents use.
func checkAllDefects(t *testing.T, err error, want []string) {
	t.Helper()
	var got []string
	for _, e := range defects(t, err) {
		got = append(got, strings.SplitN(e.Error(), ": ", 3)[0]+": "+e.Path)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defects:\n%s\nwant\n%s\nfull error:\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
	if strings.Contains(err.Error(), "other-secret-12") || strings.Contains(err.Error(), "same-secret-12") {
		t.Errorf("an error message shows a secret: %v", err)
	}
}

func TestTooManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns:\n")
	for range 150 {
		b.WriteString("      - {id: 99999, memory: 1GiB}\n")
	}
	_, err := ParseTarget("many.yaml", []byte(b.String()))
	list := defects(t, err)
	if len(list) != maxErrors+1 || list[maxErrors].Error() != "many.yaml: and 50 more errors" {
		t.Errorf("got %d defects, last %v", len(list), list[len(list)-1])
	}
}

// TestAliasBomb checks that nested aliases cannot make a small file expand
// without bound.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns: &l [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{id: %d, memory: 1MiB}", i)
	}
	b.WriteString("]\n")
	for i := range 1000 {
		b.WriteString("  - {name: iqn.2026-11.io.ddpstore:b")
		b.WriteString(strings.Repeat("x", i%10))
		b.WriteString(", luns: *l}\n")
	}
	_, err := ParseTarget("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("alias bomb: %.300v", err)
	}
}

// TestMessages checks the wording of defects the corpus test only locates.
func TestMessages(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"top-level list", "- a\n- b\n", "bad.yaml:1: expected a mapping (a target configuration: portals, targets, discovery_chap, limits, log, metrics, control, state), found a list"},
		{"top-level scalar", "hello\n", `bad.yaml:1: expected a mapping (a target configuration: portals, targets, discovery_chap, limits, log, metrics, control, state), found the string "hello"`},
		{"null document", "---\n~\n", "bad.yaml:2: the document is empty"},
		{"unknown field", "targets: []\nportal: []\n", `bad.yaml:2: unknown field "portal" (did you mean "portals"?); the fields of a target configuration are portals, targets, discovery_chap, limits, log, metrics, control and state`},
		{"merge key", "targets:\n  - <<: {name: x}\n", "bad.yaml:2: targets[0]: merge keys (<<) are not supported"},
		{"tag", "targets:\n  - name: !!binary aGVsbG8=\n", "bad.yaml:2: targets[0].name: the tag !!binary is not supported"},
		{"tab", "targets:\n\t- name: x\n", "bad.yaml:2: YAML syntax: found character that cannot start any token (a tab indents this line: YAML indents with spaces only)"},
		{"short secret", "discovery_chap: {user: u, secret: 0123456789}\ntargets: []\n",
			"bad.yaml:1:35: discovery_chap.secret: too short (10 octets): RFC 7143 section 9.2.1 requires at least 96 bits (12 octets) of secret unless IPsec protects the connection, and ddpstore has no IPsec"},
		{"same secret", "discovery_chap: {user: u, secret: 0123456789ab, mutual_user: t, mutual_secret: 0123456789ab}\ntargets: []\n",
			"bad.yaml:1:80: discovery_chap.mutual_secret: the same as secret: RFC 7143 section 9.2.1 forbids one secret authenticating both initiators and targets"},
		{"mutual without one-way", "discovery_chap: {mutual_user: t, mutual_secret: 0123456789ab}\ntargets: []\n",
			"bad.yaml:1: discovery_chap: mutual CHAP needs one-way CHAP too"},
		{"empty chap", "discovery_chap: {}\ntargets: []\n", "bad.yaml:1: discovery_chap: no credentials: give user and secret"},
		{"mpa on sctp", "portals: [{listen: ':1', transport: sctp, mpa: {crc: false}}]\ntargets: []\n",
			"bad.yaml:1:43: portals[0].mpa: only tcp portals use MPA: DDP runs over SCTP without it (RFC 5043); remove mpa"},
		{"mpa on iscsi-tcp", "portals: [{listen: ':1', transport: iscsi-tcp, mpa: {crc: false}}]\ntargets: []\n",
			"bad.yaml:1:48: portals[0].mpa: only tcp portals use MPA: iSCSI over TCP carries no DDP; remove mpa"},
		{"iscsi-tcp on an iSER tcp portal's port", "portals: [{listen: ':1'}, {listen: ':1', transport: iscsi-tcp}]\ntargets: []\n",
			"bad.yaml:1:36: portals[1].listen: duplicate portal: iscsi-tcp :1 is the same address as the portal at line 1"},
		{"same port other transport", "portals: [{listen: ':1'}, {listen: ':1', transport: sctp}, {listen: ':1', transport: sctp}]\ntargets: []\n",
			"bad.yaml:1:69: portals[2].listen: duplicate portal: sctp :1 is the same address as the portal at line 1"},
		{"wildcard after address", "portals:\n  - listen: 10.0.0.1:3260\n  - listen: 0.0.0.0:3260\ntargets: []\n",
			"bad.yaml:3: portals[1].listen: tcp 0.0.0.0:3260 listens on every address on port 3260, which overlaps the portal at line 2"},
		{"address after wildcard", "portals:\n  - listen: '[::]:3260'\n  - listen: '[::1]:3260'\ntargets: []\n",
			"bad.yaml:3: portals[1].listen: tcp [::1]:3260 overlaps the portal at line 2, which listens on every address on port 3260"},
		{"two wildcards", "portals:\n  - listen: ':3260'\n  - listen: '[::]:3260'\ntargets: []\n",
			"bad.yaml:3: portals[1].listen: duplicate portal: tcp [::]:3260 is the same address as the portal at line 2"},
		{"shared store", "targets:\n  - name: eui.02004567a425678d\n    luns:\n      - {id: 0, path: /srv/x, readonly: true}\n      - {id: 1, path: /srv/./x}\n",
			`bad.yaml:5:23: targets[0].luns[1].path: "/srv/./x" is already the backing store of targets[0].luns[0] (line 4, column 23): two LUNs on one store would corrupt each other's data unless both are readonly`},
		{"odd size", "targets:\n  - name: eui.02004567a425678d\n    luns:\n      - {id: 0, path: /srv/x, size: 1000}\n",
			"bad.yaml:4:37: targets[0].luns[0].size: 1000B is not a whole number of 512-octet blocks (use 512B or 1KiB)"},
		{"tiny size", "targets:\n  - name: eui.02004567a425678d\n    luns:\n      - {id: 0, memory: 100}\n",
			"bad.yaml:4:25: targets[0].luns[0].memory: 100B is not a whole number of 512-octet blocks (use 512B)"},
		{"int tag", "targets:\n  - name: eui.02004567a425678d\n    luns: [{id: !!int abc, memory: 1MiB}]\n", `bad.yaml:3:17: targets[0].luns[0].id: "abc" is not an integer`},
		{"date", "targets:\n  - name: eui.02004567a425678d\n    luns: [{id: 2026-11-01, memory: 1MiB}]\n", `bad.yaml:3:17: targets[0].luns[0].id: the date 2026-11-01 is not an integer`},
		{"custom tag", "targets:\n  - name: !disk eui.02004567a425678d\n", `bad.yaml:2: targets[0].name: the tag !disk is not supported: expected an iSCSI name`},
		{"empty document", "--- # nothing\n...\n", "bad.yaml:1: the document is empty"},
		{"metrics unknown field", "targets: []\nmetrics: {listen: ':9740', port: 9740}\n",
			`bad.yaml:2:28: metrics: unknown field "port"; the fields of metrics are listen`},
		{"metrics on a portal", "portals: [{listen: '0.0.0.0:3260'}]\ntargets: []\nmetrics: {listen: 127.0.0.1:3260}\n",
			"bad.yaml:3:19: metrics.listen: 127.0.0.1:3260 is also where portals[0] (0.0.0.0:3260) listens: give the metrics endpoint a port of its own"},
		{"metrics bad port", "targets: []\nmetrics:\n  listen: localhost\n", "bad.yaml:3: metrics.listen: "},
		{"immediate_data not a boolean", "targets:\n  - name: iqn.2026-11.io.x:a\n    luns: [{id: 0, memory: 1MiB}]\n    immediate_data: no\n",
			`bad.yaml:4: targets[0].immediate_data: the string "no" is not a boolean (use true or false)`},
		{"alua group not listed", "targets:\n  - name: iqn.2026-11.io.x:a\n    luns: [{id: 0, memory: 1MiB}]\n    alua: {group: 3, groups: [{id: 1}, {id: 2}]}\n",
			"bad.yaml:4:19: targets[0].alua.group: 3 is not among the groups"},
		{"alua duplicate group", "targets:\n  - name: iqn.2026-11.io.x:a\n    luns: [{id: 0, memory: 1MiB}]\n    alua: {group: 1, groups: [{id: 1}, {id: 1}]}\n",
			"bad.yaml:4:45: targets[0].alua.groups[1].id: duplicate port group id 1 (first at line 4, column 36)"},
		{"alua bad state", "targets:\n  - name: iqn.2026-11.io.x:a\n    luns: [{id: 0, memory: 1MiB}]\n    alua: {group: 1, groups: [{id: 1, state: active}]}\n",
			`bad.yaml:4:46: targets[0].alua.groups[0].state: "active" is not an ALUA state (did you mean "active-optimized"?)`},
		{"alua no groups", "targets:\n  - name: iqn.2026-11.io.x:a\n    luns: [{id: 0, memory: 1MiB}]\n    alua: {group: 1}\n",
			"bad.yaml:4:11: targets[0].alua.groups: missing: list every gateway's port group"},
		{"state relative", "targets: []\nstate:\n  dir: var/lib/x\n",
			`bad.yaml:3: state.dir: "var/lib/x" is relative: write an absolute path, as /var/lib/ddpstore`},
		{"state unknown field", "targets: []\nstate: {path: /x}\n", `bad.yaml:2:9: state: unknown field "path"; the fields of state are dir`},
		{"control relative", "targets: []\ncontrol:\n  socket: run/ddptarget.sock\n",
			`bad.yaml:3: control.socket: "run/ddptarget.sock" is relative: write an absolute path, as /run/ddpstore/ddptarget.sock`},
		{"control directory", "targets: []\ncontrol: {socket: /run/ddpstore/}\n",
			`bad.yaml:2:19: control.socket: "/run/ddpstore/" names a directory`},
		{"control too long", "targets: []\ncontrol: {socket: /" + strings.Repeat("x", 110) + "}\n",
			"bad.yaml:2:19: control.socket: 111 octets long: a unix socket path holds at most 107"},
		{"control unknown field", "targets: []\ncontrol:\n  path: /run/x.sock\n",
			`bad.yaml:3: control: unknown field "path"; the fields of control are socket`},
		{"login timeout too short", "targets: []\nlimits: {login_timeout: 100ms}\n", "bad.yaml:2:25: limits.login_timeout: login timeout 100ms is out of range (1s..1h)"},
		{"quoted integer", "targets: []\nlimits:\n  queue_depth: '32'\n", `bad.yaml:3: limits.queue_depth: the string "32" is not an integer (remove the quotes)`},
		{"quoted bool", "targets:\n  - name: eui.02004567a425678d\n    luns: [{id: 0, memory: 1MiB, readonly: 'true'}]\n", `bad.yaml:3:44: targets[0].luns[0].readonly: the string "true" is not a boolean (use true or false) (remove the quotes)`},
	}
	for _, tt := range tests {
		_, err := ParseTarget("bad.yaml", []byte(tt.doc))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		found := false
		for _, e := range defects(t, err) {
			found = found || strings.HasPrefix(e.Error(), tt.want)
		}
		if !found {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, tt.want)
		}
	}
}

// TestLineBreaks checks line numbers in files with CR LF and CR line breaks,
// and with a byte order mark, for semantic and syntax defects alike.
func TestLineBreaks(t *testing.T) {
	valid := "targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns:\n      - {id: 0, memory: 1MiB}\n"
	semantic := "targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns:\n      - {id: 0, memory: 1MB}\n"
	syntax := "targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns: x: y\n      - {id: 0, memory: 1MiB}\n"
	for _, br := range []string{"\n", "\r\n", "\r", "\u0085", "\u2028", "\u2029"} {
		for _, bom := range []string{"", "\ufeff"} {
			conv := func(s string) []byte { return []byte(bom + strings.ReplaceAll(s, "\n", br)) }
			if _, err := ParseTarget("ok.yaml", conv(valid)); err != nil {
				t.Errorf("break %q bom %q: %v", br, bom, err)
			}
			_, err := ParseTarget("bad.yaml", conv(semantic))
			if err == nil || !strings.HasPrefix(err.Error(), "bad.yaml:4:25: targets[0].luns[0].memory: ") {
				t.Errorf("break %q bom %q: semantic defect: %v", br, bom, err)
			}
			_, err = ParseTarget("bad.yaml", conv(syntax))
			if err == nil || !strings.HasPrefix(err.Error(), "bad.yaml:3: YAML syntax: ") {
				t.Errorf("break %q bom %q: syntax defect: %v", br, bom, err)
			}
		}
	}
	if _, err := ParseTarget("", []byte("targets: 1\n")); err == nil || !strings.HasPrefix(err.Error(), "config:1:") {
		t.Errorf("no file name: %v", err)
	}
}

// TestSyntaxLineLongFile checks that syntax errors are placed right in files
// too long for the line-by-line search.
func TestSyntaxLineLongFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("targets:\n  - name: iqn.2026-11.io.ddpstore:a\n    luns:\n")
	for i := range 3000 {
		if i == 2500 {
			b.WriteString("      - {id: 1, memory: 1MiB]\n") // line 2504
			continue
		}
		b.WriteString("      - {id: 0, memory: 1MiB}\n")
	}
	_, err := ParseTarget("long.yaml", []byte(b.String()))
	if err == nil || !strings.HasPrefix(err.Error(), "long.yaml:2504: YAML syntax: ") {
		t.Errorf("got %v, want a syntax error at line 2504", err)
	}
}

func TestParseRBD(t *testing.T) {
	doc := "targets:\n" +
		"  - name: iqn.2026-11.io.x:a\n" +
		"    luns:\n" +
		"      - {id: 0, rbd: {image: disk1}}\n" +
		"      - {id: 1, rbd: {pool: fast, image: disk2, conf: /srv/ceph.conf, user: gw, keyring: /srv/gw.keyring}, readonly: true}\n"
	cfg, err := ParseTarget("rbd.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []RBD{
		{Pool: DefaultRBDPool, Image: "disk1", Conf: DefaultCephConf, User: DefaultCephUser},
		{Pool: "fast", Image: "disk2", Conf: "/srv/ceph.conf", User: "gw", Keyring: "/srv/gw.keyring"},
	}
	for i, w := range want {
		if got := cfg.Targets[0].LUNs[i].RBD; got != w {
			t.Errorf("luns[%d].rbd = %+v, want %+v", i, got, w)
		}
	}
	if !cfg.Targets[0].LUNs[1].ReadOnly {
		t.Error("luns[1].readonly lost")
	}
	checkRoundTrip(t, map[string]string{"rbd": doc}, mustParse)
}
