package config

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// initiatorExampleYAML is the example of the brief and docs/config.md, with
// CHAP secrets of the 12 octets RFC 7143 requires.
const initiatorExampleYAML = `initiator_name: iqn.2026-11.io.ddpstore:host1
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    portals: [127.0.0.1:3260]            # host:port to dial; at least one
    transport: tcp                        # tcp | sctp | sctp-udp (default tcp)
    luns: [0, 1]                          # absent or empty: every LUN the target reports
    chap: {user: u, secret: initiator-secret, mutual_user: t, mutual_secret: target-secret}
queue_depth: 128
buffers: 64MiB
mpa: {revision: 2, markers: false, crc: true}
mount: {direct_io: true, max_write: 1MiB, allow_other: false}
recovery_timeout: 30s
nop: {interval: 5s, timeout: 15s}
log: {level: info, format: text}
`

func exampleInitiator() *Initiator {
	return &Initiator{
		InitiatorName: "iqn.2026-11.io.ddpstore:host1",
		Targets: []RemoteTarget{{
			Name:      "iqn.2026-11.io.ddpstore:disk1",
			Portals:   []string{"127.0.0.1:3260"},
			Transport: TransportTCP,
			LUNs:      []int{0, 1},
			CHAP:      &CHAP{User: "u", Secret: "initiator-secret", MutualUser: "t", MutualSecret: "target-secret"},
		}},
		QueueDepth:      128,
		Buffers:         64 * MiB,
		MPA:             MPA{Revision: 2, Markers: false, CRC: true},
		Mount:           Mount{DirectIO: true, MaxWrite: MiB, AllowOther: false, IOURing: "off"},
		RecoveryTimeout: 30 * time.Second,
		NOP:             NOP{Interval: 5 * time.Second, Timeout: 15 * time.Second},
		Log:             Log{Level: "info", Format: "text"},
	}
}

func mustParseInitiator(t *testing.T, name, doc string) *Initiator {
	t.Helper()
	got, err := ParseInitiator(name, []byte(doc))
	if err != nil {
		t.Fatalf("ParseInitiator(%s): %v", name, err)
	}
	return got
}

func TestParseInitiatorExample(t *testing.T) {
	got := mustParseInitiator(t, "example.yaml", initiatorExampleYAML)
	if want := exampleInitiator(); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseInitiator(example) =\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseInitiatorDefaults(t *testing.T) {
	got := mustParseInitiator(t, "min.yaml", `
initiator_name: eui.02004567a425678d
targets:
  - name: iqn.2026-11.io.ddpstore:min
    portals:
      - storage.example.com:3260
      - "[fe80::1%eth0]:3260"
  - {name: naa.52004567ba64678d, portals: ["10.0.0.1:3261"], transport: sctp-udp, luns: []}
`)
	want := &Initiator{
		InitiatorName: "eui.02004567a425678d",
		Targets: []RemoteTarget{
			{Name: "iqn.2026-11.io.ddpstore:min", Portals: []string{"storage.example.com:3260", "[fe80::1%eth0]:3260"}, Transport: TransportTCP},
			{Name: "naa.52004567ba64678d", Portals: []string{"10.0.0.1:3261"}, Transport: TransportSCTPUDP},
		},
		QueueDepth: DefaultQueueDepth, Buffers: DefaultBuffers, MPA: DefaultMPA(), Mount: DefaultMount(),
		RecoveryTimeout: DefaultRecoveryTimeout, NOP: DefaultNOP(), Log: DefaultLog(),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %#v\nwant %#v", got, want)
	}
	if DefaultMount() != (Mount{DirectIO: true, MaxWrite: MiB, IOURing: "off"}) || DefaultNOP() != (NOP{5 * time.Second, 15 * time.Second}) ||
		DefaultQueueDepth != 128 || DefaultBuffers != 64*MiB || DefaultRecoveryTimeout != 30*time.Second {
		t.Errorf("defaults changed: %+v %+v", DefaultMount(), DefaultNOP())
	}

	// Partial sections keep the defaults of the fields they leave out;
	// keepalive off keeps the default timeout, unused.
	got = mustParseInitiator(t, "partial.yaml", `
initiator_name: iqn.2026-11.io.ddpstore:host1
targets: [{name: iqn.2026-11.io.ddpstore:a, portals: ["[::1]:3260"]}]
mpa: {markers: true}
mount: {allow_other: true}
nop: {interval: 0}
log: {format: json}
`)
	if got.MPA != (MPA{Revision: 2, Markers: true, CRC: true}) || got.Mount != (Mount{DirectIO: true, MaxWrite: MiB, AllowOther: true, IOURing: "off"}) ||
		got.NOP != (NOP{Interval: 0, Timeout: 15 * time.Second}) || got.Log != (Log{Level: "info", Format: "json"}) {
		t.Errorf("partial sections: %+v %+v %+v %+v", got.MPA, got.Mount, got.NOP, got.Log)
	}
}

func TestDefaultInitiator(t *testing.T) {
	got := DefaultInitiator()
	want := &Initiator{
		InitiatorName: "iqn.2026-11.io.ddpstore:initiator",
		Targets:       []RemoteTarget{{Name: "iqn.2026-11.io.ddpstore:default", Portals: []string{"127.0.0.1:3260"}, Transport: TransportTCP}},
		QueueDepth:    128, Buffers: 64 * MiB, MPA: DefaultMPA(), Mount: DefaultMount(),
		RecoveryTimeout: 30 * time.Second, NOP: DefaultNOP(), Log: DefaultLog(),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultInitiator() = %#v, want %#v", got, want)
	}
	got.Targets[0].Portals[0] = "changed:1"
	if DefaultInitiator().Targets[0].Portals[0] != "127.0.0.1:3260" {
		t.Errorf("DefaultInitiator shares state between calls")
	}

	// The default initiator reaches the default target, with its MPA options,
	// and the target admits it.
	target, init := DefaultTarget(), DefaultInitiator()
	tt, it := target.Targets[0], init.Targets[0]
	if it.Name != tt.Name || it.Portals[0] != target.Portals[0].Listen || it.Transport != target.Portals[0].Transport ||
		init.MPA != target.Portals[0].MPA || tt.Initiators != nil || tt.CHAP != nil || it.CHAP != nil {
		t.Errorf("the default initiator does not match the default target:\n%+v\n%+v", init, target)
	}
	if init.QueueDepth > target.Limits.QueueDepth {
		t.Errorf("the default queue depth %d exceeds the default target's %d", init.QueueDepth, target.Limits.QueueDepth)
	}
}

func TestInitiatorMarshalOutput(t *testing.T) {
	out, err := DefaultInitiator().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `# ddpinitiator configuration, every default spelled out

initiator_name: iqn.2026-11.io.ddpstore:initiator
targets:
  - name: iqn.2026-11.io.ddpstore:default
    portals:
      - 127.0.0.1:3260
    transport: tcp
queue_depth: 128
buffers: 64MiB
mpa: {revision: 2, markers: false, crc: true}
mount: {direct_io: true, max_write: 1MiB, allow_other: false, io_uring: off}
recovery_timeout: 30s
nop: {interval: 5s, timeout: 15s}
log: {level: info, format: text}
`
	if string(out) != want {
		t.Errorf("Marshal(DefaultInitiator()) =\n%s\nwant\n%s", out, want)
	}
}

// initiatorRoundTripDocs are accepted configurations exercising every field,
// the strings YAML would misread if Marshal did not quote them, and the
// settings Marshal leaves out (mpa without tcp targets, the timeout of a
// keepalive that is off).
var initiatorRoundTripDocs = map[string]string{
	"example": initiatorExampleYAML,
	"default": string(defaultInitiatorYAML),
	"quoting": `
initiator_name: "iqn.2026-11.io.ddpstore:null"
targets:
  - name: iqn.2026-11.io.ddpstore:quoting
    portals: ["[fe80::1%eth0]:3260", "[::1]:1", storage.example.com:65535, "10.0.0.1:03260"]
    transport: sctp-udp
    luns: [16383, 0, 0x10]
    chap: {user: "true", secret: "123456789012345", mutual_user: "0x1F", mutual_secret: '- a: b, {c} [d] #e'}
  - name: eui.02004567a425678d
    portals: [localhost:3260]
    chap: {user: 2026-11-01, secret: 2026-11-01T10:00:00Z}
discovery_chap: {user: "1.5", secret: ".inf.inf.inf.inf", mutual_user: "@x", mutual_secret: "*not-an-alias*"}
queue_depth: 4096
buffers: 4GiB
mpa: {revision: 1, markers: true, crc: false}
mount: {direct_io: false, max_write: 4KiB, allow_other: true, io_uring: "off"}
recovery_timeout: 1h
nop: {interval: 1h0m0s, timeout: 1s}
log: {level: trace, format: json}
`,
	"sctp-only": `
initiator_name: iqn.2026-11.io.ddpstore:host1
targets:
  - {name: iqn.2026-11.io.ddpstore:a, portals: ["127.0.0.1:3260"], transport: sctp}
  - {name: iqn.2026-11.io.ddpstore:b, portals: ["127.0.0.1:3260"], transport: sctp-udp}
buffers: 1572864
recovery_timeout: 90s
nop: {interval: 0s}
`,
	"durations": `
initiator_name: iqn.2026-11.io.ddpstore:host1
targets: [{name: iqn.2026-11.io.ddpstore:a, portals: ["127.0.0.1:3260"]}]
recovery_timeout: 1.5s
nop: {interval: 1m30.25s, timeout: 3599999999999ns}
mount: {max_write: 0.5MiB}
`,
	"aliases": `
initiator_name: iqn.2026-11.io.ddpstore:host1
targets:
  - name: iqn.2026-11.io.ddpstore:a
    portals: &p [127.0.0.1:3260, 127.0.0.2:3260]
    luns: &l [1, 2]
    chap: &chap {user: shared, secret: shared-secret-1}
  - name: iqn.2026-11.io.ddpstore:b
    portals: *p
    luns: *l
    chap: *chap
recovery_timeout: &t 45s
nop: {interval: *t}
`,
}

func TestInitiatorMarshalRoundTrip(t *testing.T) {
	checkRoundTrip(t, initiatorRoundTripDocs, mustParseInitiator)
}

// TestInitiatorMarshalRoundTripGenerated builds random valid configurations,
// changes them with random overrides, and checks that Marshal writes what
// ParseInitiator reads back unchanged.
func TestInitiatorMarshalRoundTripGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(7143, 6581))
	for i := range 300 {
		want := randomInitiator(r)
		for range r.IntN(4) {
			flag, value := randomOverride(r)
			before := *want
			if err := want.Override(flag, value); err != nil && !reflect.DeepEqual(&before, want) {
				t.Fatalf("#%d: Override(%s, %s) failed (%v) and changed the configuration", i, flag, value, err)
			}
		}
		out, err := want.Marshal()
		if err != nil {
			t.Fatalf("#%d: Marshal: %v", i, err)
		}
		got, err := ParseInitiator(fmt.Sprintf("generated-%d.yaml", i), out)
		if err != nil {
			t.Fatalf("#%d: Marshal output rejected: %v\n%s", i, err, out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("#%d: round trip changed the configuration:\nwant %#v\n got %#v\n%s", i, want, got, out)
		}
	}
}

func randomDuration(r *rand.Rand, lo, hi time.Duration) time.Duration {
	switch r.IntN(3) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

func randomInitiator(r *rand.Rand) *Initiator {
	c := &Initiator{
		InitiatorName:   fmt.Sprintf("iqn.2026-11.io.ddpstore:host%d", r.IntN(100)),
		QueueDepth:      1 + r.IntN(MaxQueueDepth),
		Buffers:         MinBuffers + Size(r.Int64N(int64((MaxBuffers-MinBuffers)/pageSize)+1))*pageSize,
		MPA:             MPA{Revision: 1 + r.IntN(2), Markers: r.IntN(2) == 0, CRC: r.IntN(2) == 0},
		Mount:           Mount{DirectIO: r.IntN(2) == 0, MaxWrite: Size(1+r.IntN(256)) * pageSize, AllowOther: r.IntN(2) == 0, IOURing: ioURingValues[r.IntN(len(ioURingValues))]},
		RecoveryTimeout: randomDuration(r, minTimeout, maxTimeout),
		NOP:             NOP{Interval: randomDuration(r, minTimeout, maxTimeout), Timeout: randomDuration(r, minTimeout, maxTimeout)},
		Log:             Log{Level: logLevels[r.IntN(len(logLevels))], Format: logFormats[r.IntN(len(logFormats))]},
	}
	if r.IntN(4) == 0 {
		c.NOP = NOP{Interval: 0, Timeout: DefaultNOP().Timeout}
	}
	hosts := []string{"127.0.0.1", "[::1]", "localhost", "storage.example.com", "[fe80::1%eth0]", "10.0.0.1"}
	allSCTP := r.IntN(4) == 0
	for i := range 1 + r.IntN(3) {
		rt := RemoteTarget{Name: fmt.Sprintf("iqn.2026-11.io.ddpstore:t%d:%s", i, strings.Repeat("ab.c:d-9", 1+r.IntN(5))), Transport: transports[r.IntN(len(transports))]}
		if allSCTP {
			rt.Transport = TransportSCTP
		}
		for j := range 1 + r.IntN(3) {
			rt.Portals = append(rt.Portals, fmt.Sprintf("%s:%d", hosts[r.IntN(len(hosts))], 3260+j)) // distinct ports: no duplicates
		}
		for range r.IntN(4) {
			l := r.IntN(MaxLUNID + 1)
			for _, other := range rt.LUNs {
				if other == l {
					l = -1
				}
			}
			if l >= 0 {
				rt.LUNs = append(rt.LUNs, l)
			}
		}
		if r.IntN(2) == 0 {
			rt.CHAP = randomCHAP(r, i)
		}
		if rt.Transport == TransportISCSITCP {
			rt.HeaderDigest, rt.DataDigest = r.IntN(2) == 0, r.IntN(2) == 0
		}
		c.Targets = append(c.Targets, rt)
	}
	if !c.usesTCP() {
		c.MPA = DefaultMPA() // unused, and so not written
	}
	if r.IntN(2) == 0 {
		c.DiscoveryCHAP = randomCHAP(r, 99)
	}
	return c
}

// randomOverride returns a flag and a value for it, valid or not.
func randomOverride(r *rand.Rand) (string, string) {
	values := map[string][]string{
		"initiator-name":    {"iqn.2026-11.io.ddpstore:other", "eui.02004567a425678d", "bad"},
		"queue-depth":       {"1", "64", "4096", "0", "x"},
		"buffers":           {"1MiB", "128MiB", "4GiB", "1GB", "1025KiB"},
		"recovery-timeout":  {"1s", "2m", "1h", "0", "30"},
		"mpa-revision":      {"1", "2", "3"},
		"mpa-markers":       {"true", "false", "yes"},
		"mpa-crc":           {"true", "false"},
		"mount-direct-io":   {"true", "false"},
		"mount-max-write":   {"4KiB", "128KiB", "1MiB", "2MiB"},
		"mount-allow-other": {"true", "false"},
		"mount-io-uring":    {"auto", "on", "off", "yes"},
		"nop-interval":      {"0", "0s", "1s", "10s", "1h", "-1s"},
		"nop-timeout":       {"1s", "20s", "1h", "0"},
		"log-level":         {"debug", "trace", "loud"},
		"log-format":        {"json", "text"},
		"metrics-listen":    {"127.0.0.1:9741", ":9741", "[::1]:9741", "localhost:0", "9741"},
	}
	names := initiatorFlagNames()
	name := names[r.IntN(len(names))]
	v := values[name]
	return name, v[r.IntN(len(v))]
}

func TestLoadInitiator(t *testing.T) {
	checkLoad(t, LoadInitiator, initiatorExampleYAML, exampleInitiator(),
		"initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: x\n    portals: [127.0.0.1:3260]\n", ":3: targets[0].name: ")
}

// TestInitiatorMessages checks the wording of defects the corpus test only
// locates.
func TestInitiatorMessages(t *testing.T) {
	const head = "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets: [{name: iqn.2026-11.io.ddpstore:t, portals: [127.0.0.1:3260]}]\n"
	tests := []struct {
		name, doc, want string
	}{
		{"empty file", "", "bad.yaml:1: the file is empty: a configuration needs at least initiator_name and a targets list"},
		{"comments only", "# nothing\n", "bad.yaml:1: the file has no YAML content (only comments): a configuration needs at least initiator_name and a targets list"},
		{"null document", "---\n~\n", "bad.yaml:2: the document is empty: a configuration needs at least initiator_name and a targets list"},
		{"top-level list", "- a\n", "bad.yaml:1: expected a mapping (an initiator configuration: initiator_name, targets, discovery_chap, queue_depth, buffers, mpa, mount, recovery_timeout, nop, log, metrics), found a list"},
		{"target config", "portals:\n  - listen: 127.0.0.1:3260\ntargets: []\n", // a target's configuration given to the initiator
			`bad.yaml:1: unknown field "portals"; the fields of an initiator configuration are initiator_name, targets, discovery_chap, queue_depth, buffers, mpa, mount, recovery_timeout, nop, log and metrics`},
		{"missing name", "targets: []\n", "bad.yaml:1: initiator_name: missing: this host needs an iSCSI name of its own, as iqn.2026-11.io.example:host1 (targets admit initiators by name, and two hosts with one name take over each other's sessions)"},
		{"missing targets", "initiator_name: iqn.2026-11.io.ddpstore:h\n", "bad.yaml:1: targets: missing: an initiator logs in to at least one target (name and portals)"},
		{"empty targets", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets: []\n", "bad.yaml:2:10: targets: empty: an initiator logs in to at least one target"},
		{"missing portals", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets: [{name: iqn.2026-11.io.ddpstore:t}]\n",
			"bad.yaml:2:11: targets[0].portals: missing: a target needs at least one address to dial, as portals: [127.0.0.1:3260]"},
		{"empty portals", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets: [{name: iqn.2026-11.io.ddpstore:t, portals: []}]\n",
			"bad.yaml:2:54: targets[0].portals: empty: a target needs at least one address to dial, as [127.0.0.1:3260]"},
		{"portal string", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: 127.0.0.1:3260\n",
			`bad.yaml:4: targets[0].portals: expected a list of host:port addresses, found the string "127.0.0.1:3260"`},
		{"wildcard", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: ['[::]:3261']\n",
			`bad.yaml:4:15: targets[0].portals[0]: "[::]:3261" is the every-address wildcard, which only a listener binds to: dial an address of the target, as 127.0.0.1:3261`},
		{"no host", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [':3260']\n",
			`bad.yaml:4:15: targets[0].portals[0]: ":3260" has no host: write the address to dial, as 127.0.0.1:3260`},
		{"same portal", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals:\n      - '[::1]:3260'\n      - '[0::1]:3260'\n",
			`bad.yaml:6: targets[0].portals[1]: duplicate portal [0::1]:3260 (first at line 5)`},
		{"luns mapping", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    luns:\n      - {id: 0, memory: 1GiB}\n",
			"bad.yaml:6:9: targets[0].luns[0]: expected a LUN number, found a mapping (luns lists the numbers of the LUNs to use, as luns: [0, 1]; the target's configuration defines them)"},
		{"lun range", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    luns: [0, 16384]\n",
			"bad.yaml:5:15: targets[0].luns[1]: LUN 16384 is out of range (0..16383)"},
		{"lun duplicate", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    luns: [3, 03]\n",
			"bad.yaml:5:15: targets[0].luns[1]: duplicate LUN 3 (first at line 5, column 12)"},
		{"quoted lun", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    luns: ['0']\n",
			`bad.yaml:5:12: targets[0].luns[0]: the string "0" is not an integer (remove the quotes)`},
		{"mpa without tcp", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets: [{name: iqn.2026-11.io.ddpstore:t, portals: [127.0.0.1:3260], transport: sctp}]\nmpa: {crc: false}\n",
			"bad.yaml:3: mpa: only tcp targets use MPA, and every target here uses sctp or sctp-udp, which carry DDP without it (RFC 5043); remove mpa"},
		{"nop timeout unused", head + "nop:\n  interval: 0\n  timeout: 10s\n",
			"bad.yaml:5: nop.timeout: has no effect while nop.interval is 0 (keepalive off): remove timeout, or give an interval"},
		{"queue depth", head + "queue_depth: 8192\n", "bad.yaml:3: queue_depth: queue depth 8192 is out of range (1..4096)"},
		{"buffers small", head + "buffers: 64KiB\n", "bad.yaml:3: buffers: buffers 64KiB is out of range (1MiB..4GiB): at least one command of the largest burst, and 4096 of them at most"},
		{"buffers odd", head + "buffers: 1050000\n", "bad.yaml:3: buffers: buffers 1050000B is not a multiple of 4KiB (use 1MiB or 1028KiB)"},
		{"buffers unit", head + "buffers: 64MB\n", `bad.yaml:3: buffers: "64MB" is not a size: the unit is MiB (binary units only: KiB, MiB, GiB, TiB)`},
		{"max write big", head + "mount: {max_write: 2MiB}\n", "bad.yaml:3:20: mount.max_write: max write 2MiB is out of range (4KiB..1MiB): FUSE passes at most 256 pages at once"},
		{"max write odd", head + "mount: {max_write: 6KiB}\n", "bad.yaml:3:20: mount.max_write: max write 6KiB is not a multiple of 4KiB (use 4KiB or 8KiB)"},
		{"timeout no unit", head + "recovery_timeout: 30\n", "bad.yaml:3: recovery_timeout: 30 has no unit: write 30s for seconds (units: ns, us, ms, s, m, h)"},
		{"timeout negative", head + "recovery_timeout: -30s\n", "bad.yaml:3: recovery_timeout: recovery timeout -30s is negative (1s..1h)"},
		{"timeout long", head + "recovery_timeout: 61m\n", "bad.yaml:3: recovery_timeout: recovery timeout 61m is out of range (1s..1h)"},
		{"timeout short", head + "recovery_timeout: 999ms\n", "bad.yaml:3: recovery_timeout: recovery timeout 999ms is out of range (1s..1h)"},
		{"timeout zero", head + "recovery_timeout: 0s\n", "bad.yaml:3: recovery_timeout: recovery timeout 0s is out of range (1s..1h)"},
		{"timeout day", head + "recovery_timeout: 1d\n", `bad.yaml:3: recovery_timeout: "1d" is not a duration: unknown unit "d" (a day is 24h)`},
		{"timeout huge", head + "recovery_timeout: 99999999999999h\n", "bad.yaml:3: recovery_timeout: recovery timeout 99999999999999h is out of range (1s..1h)"},
		{"timeout word", head + "recovery_timeout: forever\n", `bad.yaml:3: recovery_timeout: "forever" is not a duration (write a number with a unit (ns, us, ms, s, m or h), as 30s, 1m30s or 500ms)`},
		{"timeout caps", head + "recovery_timeout: 30S\n", `bad.yaml:3: recovery_timeout: "30S" is not a duration: unknown unit "S" (units are lower-case: write s)`},
		{"timeout bool", head + "recovery_timeout: true\n", "bad.yaml:3: recovery_timeout: the boolean true is not a duration (write a number with a unit, as 30s)"},
		{"nop interval", head + "nop: {interval: 500ms}\n", "bad.yaml:3:17: nop.interval: NOP interval 500ms is out of range (0, which turns keepalive off, or 1s..1h)"},
		{"nop negative", head + "nop: {interval: -1s}\n", "bad.yaml:3:17: nop.interval: NOP interval -1s is negative (0, which turns keepalive off, or 1s..1h)"},
		{"nop timeout zero", head + "nop: {timeout: 0}\n", "bad.yaml:3:16: nop.timeout: NOP timeout 0 is out of range (1s..1h)"},
		{"metrics unknown", head + "metrics: {listen: ':9741', path: /m}\n", `bad.yaml:3:28: metrics: unknown field "path"; the fields of metrics are listen`},
		{"metrics wildcard ok, bad port", head + "metrics:\n  listen: '[::1]:99999'\n", "bad.yaml:4: metrics.listen: "},
		{"unknown top", head + "iodepth: 32\n", `bad.yaml:3: unknown field "iodepth"; the fields of an initiator configuration are initiator_name, targets, discovery_chap, queue_depth, buffers, mpa, mount, recovery_timeout, nop, log and metrics`},
		{"digest over iSER", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    header_digest: crc32c\n",
			"bad.yaml:5: targets[0].header_digest: only iscsi-tcp targets use iSCSI digests: over tcp, MPA's CRC covers every frame"},
		{"bad digest", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [127.0.0.1:3260]\n    transport: iscsi-tcp\n    data_digest: crc\n",
			`bad.yaml:6: targets[0].data_digest: "crc" is not a digest`},
		{"unknown target", "initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portal: [127.0.0.1:3260]\n",
			`bad.yaml:4: targets[0]: unknown field "portal" (did you mean "portals"?); the fields of a target are name, portals, transport, luns, chap, header_digest, data_digest and multipath`},
		{"unknown mount", head + "mount: {maxwrite: 1MiB}\n", `bad.yaml:3:9: mount: unknown field "maxwrite" (did you mean "max_write"?); the fields of mount are direct_io, max_write, allow_other and io_uring`},
		{"unknown nop", head + "nop: {every: 5s}\n", `bad.yaml:3:7: nop: unknown field "every"; the fields of nop are interval and timeout`},
		{"initiator misspelt", "initiator: iqn.2026-11.io.ddpstore:h\ntargets: []\n", `bad.yaml:1: unknown field "initiator" (did you mean "initiator_name"?)`},
		{"same secret", head + "discovery_chap: {user: u, secret: 0123456789ab, mutual_user: t, mutual_secret: 0123456789ab}\n",
			"bad.yaml:3:80: discovery_chap.mutual_secret: the same as secret: RFC 7143 section 9.2.1 forbids one secret authenticating both initiators and targets"},
	}
	for _, tt := range tests {
		_, err := ParseInitiator("bad.yaml", []byte(tt.doc))
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
		if strings.Contains(err.Error(), "0123456789ab") {
			t.Errorf("%s: an error message shows a secret: %v", tt.name, err)
		}
	}

	_, err := ParseInitiator("bad.yaml", []byte(`initiator_name: iqn.2026-11.io.ddpstore:h
targets:
  - {name: iqn.2026-11.io.ddpstore:t, portals: [127.0.0.1:3260]}
  - {name: iqn.2026-11.io.ddpstore:t, portals: [127.0.0.2:3260]}
`))
	if want := `bad.yaml:4:12: targets[1].name: duplicate target "iqn.2026-11.io.ddpstore:t" (first at line 3, column 12)`; err == nil || err.Error() != want {
		t.Errorf("duplicate target:\n got %v\nwant %s", err, want)
	}
}

// TestInitiatorAllErrorsSorted checks that every defect is reported, in file
// order, cross-checks included, and none shows a secret.
func TestInitiatorAllErrorsSorted(t *testing.T) {
	doc := `log: {level: loud}
initiator_name: iqn.2026-11.io.ddpstore:Host
targets:
  - name: iqn.2026-11.io.ddpstore:a
    portals: [127.0.0.1:3260, 127.0.0.1:3260]
    chap: {user: u, secret: same-secret-12, mutual_user: t, mutual_secret: other-secret-12}
    luns: [1, 1]
  - name: iqn.2026-11.io.ddpstore:a
    chap: {user: u, secret: other-secret-12}
    portals: []
nop: {interval: 0, timeout: 1s}
queue_depth: 0
`
	_, err := ParseInitiator("all.yaml", []byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	checkAllDefects(t, err, []string{
		"all.yaml:1:14: log.level",
		"all.yaml:2: initiator_name",
		"all.yaml:5:31: targets[0].portals[1]",
		"all.yaml:6:76: targets[0].chap.mutual_secret",
		"all.yaml:7:15: targets[0].luns[1]",
		"all.yaml:8: targets[1].name",
		"all.yaml:10:14: targets[1].portals",
		"all.yaml:11:20: nop.timeout",
		"all.yaml:12: queue_depth",
	})
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"0", 0, ""},
		{"0s", 0, ""},
		{"30s", 30 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"+5s", 5 * time.Second, ""},
		{"-5s", -5 * time.Second, ""},
		{"1h0m0s", time.Hour, ""},
		{"2562047h47m16.854775807s", 1<<63 - 1, ""},

		{"30", 0, "30 has no unit: write 30s for seconds"},
		{"1.5", 0, "1.5 has no unit"},
		{"-7", 0, "-7 has no unit"},
		{"1d", 0, `unknown unit "d" (a day is 24h)`},
		{"10secs", 0, `unknown unit "secs" (write s for seconds)`},
		{"10 secs", 0, `unknown unit "secs" (write s for seconds)`},
		{"2 hours", 0, `unknown unit "hours" (write h for hours)`},
		{"5M", 0, `unknown unit "M" (units are lower-case: write m)`},
		{"5w", 0, `unknown unit "w" (units: ns, us, ms, s, m, h)`},
		{"5 s", 0, `write it without spaces, as 5s`},
		{"1m 30s", 0, `write it without spaces, as 1m30s`},
		{"2562047h47m16.854775808s", 0, errDurationRange.Error()},
		{"99999999999999999999s", 0, errDurationRange.Error()},
		{"s", 0, `"s" is not a duration (write a number with a unit`},
		{"1..5s", 0, "is not a duration"},
		{"forever", 0, "is not a duration"},
		{"", 0, "is not a duration"},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("parseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parseDuration(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{{0, "0s"}, {time.Second, "1s"}, {time.Minute, "1m"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"},
		{90 * time.Second, "1m30s"}, {time.Hour + time.Second, "1h0m1s"}, {10 * time.Hour, "10h"}, {1500 * time.Millisecond, "1.5s"}, {time.Millisecond, "1ms"}} {
		if got := formatDuration(tt.in); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := time.ParseDuration(formatDuration(tt.in)); err != nil || back != tt.in {
			t.Errorf("formatDuration(%v) = %q does not read back: %v, %v", tt.in, formatDuration(tt.in), back, err)
		}
	}
}

func TestFindTarget(t *testing.T) {
	c := mustParseInitiator(t, "two.yaml", `initiator_name: iqn.2026-11.io.ddpstore:h
targets:
  - {name: iqn.2026-11.io.ddpstore:a, portals: [127.0.0.1:3260]}
  - {name: iqn.2026-11.io.ddpstore:b, portals: [127.0.0.1:3260], luns: [2]}
`)
	if rt, err := c.FindTarget("iqn.2026-11.io.ddpstore:b"); err != nil || rt != &c.Targets[1] {
		t.Errorf("FindTarget(b) = %v, %v", rt, err)
	}
	if _, err := c.FindTarget(""); err == nil || err.Error() != "the configuration has 2 targets, name one: iqn.2026-11.io.ddpstore:a, iqn.2026-11.io.ddpstore:b" {
		t.Errorf("FindTarget(\"\") = %v", err)
	}
	if _, err := c.FindTarget("iqn.2026-11.io.ddpstore:c"); err == nil || err.Error() != `no target "iqn.2026-11.io.ddpstore:c" in the configuration; it has iqn.2026-11.io.ddpstore:a, iqn.2026-11.io.ddpstore:b` {
		t.Errorf("FindTarget(c) = %v", err)
	}
	d := DefaultInitiator()
	if rt, err := d.FindTarget(""); err != nil || rt.Name != "iqn.2026-11.io.ddpstore:default" {
		t.Errorf("FindTarget(\"\") of the default = %v, %v", rt, err)
	}
	if _, err := (&Initiator{}).FindTarget(""); err == nil {
		t.Errorf("FindTarget of no targets: no error")
	}
}

func TestOverride(t *testing.T) {
	tests := []struct {
		flag, value string
		wantErr     string                // "" for success
		check       func(*Initiator) bool // on success
	}{
		{"initiator-name", "iqn.2026-11.io.ddpstore:host9", "", func(c *Initiator) bool { return c.InitiatorName == "iqn.2026-11.io.ddpstore:host9" }},
		{"--initiator-name", "eui.02004567a425678d", "", func(c *Initiator) bool { return c.InitiatorName == "eui.02004567a425678d" }},
		{"queue-depth", "32", "", func(c *Initiator) bool { return c.QueueDepth == 32 }},
		{"queue-depth", "0x20", "", func(c *Initiator) bool { return c.QueueDepth == 32 }},
		{"buffers", "256MiB", "", func(c *Initiator) bool { return c.Buffers == 256*MiB }},
		{"buffers", "1 GiB", "", func(c *Initiator) bool { return c.Buffers == GiB }},
		{"recovery-timeout", "2m", "", func(c *Initiator) bool { return c.RecoveryTimeout == 2*time.Minute }},
		{"mpa-revision", "1", "", func(c *Initiator) bool { return c.MPA.Revision == 1 }},
		{"mpa-markers", "true", "", func(c *Initiator) bool { return c.MPA.Markers }},
		{"mpa-crc", "false", "", func(c *Initiator) bool { return !c.MPA.CRC }},
		{"mount-direct-io", "false", "", func(c *Initiator) bool { return !c.Mount.DirectIO }},
		{"mount-max-write", "128KiB", "", func(c *Initiator) bool { return c.Mount.MaxWrite == 128*KiB }},
		{"mount-allow-other", "true", "", func(c *Initiator) bool { return c.Mount.AllowOther }},
		{"mount-io-uring", "off", "", func(c *Initiator) bool { return c.Mount.IOURing == "off" }},
		{"mount-io-uring", "always", `--mount-io-uring: "always" is not an io_uring mode; use auto, on or off`, nil},
		{"nop-interval", "0", "", func(c *Initiator) bool { return c.NOP == NOP{0, 15 * time.Second} }},
		{"nop-interval", "1m", "", func(c *Initiator) bool { return c.NOP == NOP{time.Minute, 15 * time.Second} }},
		{"nop-timeout", "1m", "", func(c *Initiator) bool { return c.NOP == NOP{5 * time.Second, time.Minute} }},
		{"log-level", "debug", "", func(c *Initiator) bool { return c.Log.Level == "debug" }},
		{"log-format", "json", "", func(c *Initiator) bool { return c.Log.Format == "json" }},

		{"initiator-name", "IQN.2026-11.io.ddpstore:h", `--initiator-name: "IQN.2026-11.io.ddpstore:h" is not an iSCSI name: iSCSI names are lower-case`, nil},
		{"initiator-name", "2026", `--initiator-name: "2026" is not an iSCSI name`, nil}, // an integer, taken as written
		{"initiator-name", "", "--initiator-name: no value: expected an iSCSI name", nil},
		{"queue-depth", "0", "--queue-depth: queue depth 0 is out of range (1..4096)", nil},
		{"queue-depth", "many", `--queue-depth: the string "many" is not an integer`, nil},
		{"queue-depth", "1.5", "--queue-depth: the number 1.5 is not an integer", nil},
		{"buffers", "64MB", `--buffers: "64MB" is not a size: the unit is MiB`, nil},
		{"buffers", "8GiB", "--buffers: buffers 8GiB is out of range (1MiB..4GiB)", nil},
		{"recovery-timeout", "30", "--recovery-timeout: 30 has no unit: write 30s for seconds", nil},
		{"recovery-timeout", "-1m", "--recovery-timeout: recovery timeout -1m is negative (1s..1h)", nil},
		{"recovery-timeout", "2h", "--recovery-timeout: recovery timeout 2h is out of range (1s..1h)", nil},
		{"mpa-revision", "3", "--mpa-revision: MPA revision 3 is out of range (1..2): 1 is RFC 5044, 2 adds the RFC 6581 startup", nil},
		{"mpa-markers", "yes", `--mpa-markers: the string "yes" is not a boolean (use true or false)`, nil},
		{"mount-max-write", "2MiB", "--mount-max-write: max write 2MiB is out of range (4KiB..1MiB)", nil},
		{"nop-interval", "100ms", "--nop-interval: NOP interval 100ms is out of range (0, which turns keepalive off, or 1s..1h)", nil},
		{"nop-timeout", "0", "--nop-timeout: NOP timeout 0 is out of range (1s..1h)", nil},
		{"log-level", "warning", `--log-level: "warning" is not a log level (did you mean "warn"?); use panic, fatal, error, warn, info, debug or trace`, nil},
		{"log-format", "yaml", `--log-format: "yaml" is not a log format; use text or json`, nil},
		{"queu-depth", "1", "--queu-depth is not a setting a flag overrides (did you mean --queue-depth?); the settings are --initiator-name, --queue-depth, --buffers, --mpa-revision, --mpa-markers, --mpa-crc, --mount-direct-io, --mount-max-write, --mount-allow-other, --mount-io-uring, --recovery-timeout, --nop-interval, --nop-timeout, --log-level, --log-format and --metrics-listen", nil},
		{"queue_depth", "1", `--queue_depth is not a setting a flag overrides (did you mean --queue-depth?)`, nil},
		{"target", "x", "--target is not a setting a flag overrides; the settings are", nil},
	}
	for _, tt := range tests {
		c := DefaultInitiator()
		err := c.Override(tt.flag, tt.value)
		if tt.wantErr == "" {
			if err != nil || !tt.check(c) {
				t.Errorf("Override(%s, %q) = %v, configuration %+v", tt.flag, tt.value, err, c)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
			t.Errorf("Override(%s, %q) = %v, want an error starting %q", tt.flag, tt.value, err, tt.wantErr)
		}
		if !reflect.DeepEqual(c, DefaultInitiator()) {
			t.Errorf("Override(%s, %q) failed but changed the configuration: %+v", tt.flag, tt.value, c)
		}
	}

	// Guards: what the file refuses, the flags refuse too.
	c := DefaultInitiator()
	if err := c.Override("nop-interval", "0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Override("nop-timeout", "20s"); err == nil || err.Error() != "--nop-timeout: has no effect while the NOP interval is 0 (keepalive off): give --nop-interval too" {
		t.Errorf("nop-timeout with keepalive off: %v", err)
	}
	if err := c.Override("nop-interval", "2s"); err != nil || c.NOP != (NOP{2 * time.Second, 15 * time.Second}) {
		t.Errorf("nop-interval back on: %v, %+v", err, c.NOP)
	}
	c.Targets[0].Transport = TransportSCTP
	for _, f := range []string{"mpa-revision", "mpa-markers", "mpa-crc"} {
		if err := c.Override(f, "1"); err == nil || !strings.HasPrefix(err.Error(), "--"+f+": only tcp targets use MPA, and every target here uses sctp or sctp-udp") {
			t.Errorf("%s without tcp targets: %v", f, err)
		}
	}
}

// TestOverrideLikeFile checks that a flag accepts exactly the values the
// file accepts, with the same result and the same message: for every setting
// and a spread of values, the corpus base with the value written in is
// compared with the corpus base overridden by the flag.
func TestOverrideLikeFile(t *testing.T) {
	tags := map[string]string{
		"initiator_name": "iname", "queue_depth": "qd", "buffers": "buffers", "recovery_timeout": "recovery",
		"mpa.revision": "revision", "mpa.markers": "markers", "mpa.crc": "crc",
		"mount.direct_io": "directio", "mount.max_write": "maxwrite", "mount.allow_other": "allowother", "mount.io_uring": "iouring",
		"nop.interval": "interval", "nop.timeout": "timeout", "log.level": "level", "log.format": "format",
		"metrics.listen": "mlisten",
	}
	values := []string{"", "~", "0", "1", "2", "-1", "7", "128", "4096", "4097", "0x10", "1.5", "1e3", "true", "false", "yes", "on",
		"x", "info", "warn", "INFO", "json", "JSON", "0s", "1s", "999ms", "30s", "30", "1h", "61m", "-5s", "1d", "5 s", "1m30s",
		"4KiB", "6KiB", "1MiB", "2MiB", "64MiB", "64MB", "1025KiB", "4GiB", "8GiB", "1 GiB", "2026-11-01",
		"iqn.2026-11.io.ddpstore:other", "IQN.2026-11.io.ddpstore:x", "eui.02004567a425678d", "naa.123"}
	base := mustParseInitiator(t, "base.yaml", initiatorCorpusBase)
	checked := 0
	for _, s := range InitiatorSettings() {
		tag, ok := tags[s.Field]
		if !ok {
			t.Errorf("setting %s has no line in the corpus base", s.Field)
			continue
		}
		for _, v := range values {
			d := newDoc(initiatorCorpusBase).set(tag, v)
			if s.Field == "nop.interval" {
				d.del("timeout") // the file may not give a timeout with keepalive off; the flag resets it
			}
			text := d.String()
			fromFile, fileErr := ParseInitiator("f.yaml", []byte(text))
			fromFlag := *base
			flagErr := fromFlag.Override(s.Flag, v)
			switch {
			case (fileErr == nil) != (flagErr == nil):
				t.Errorf("%s %q: file %v, flag %v", s.Flag, v, fileErr, flagErr)
			case fileErr == nil && !reflect.DeepEqual(fromFile, &fromFlag):
				t.Errorf("%s %q: file gives %+v, flag %+v", s.Flag, v, fromFile, &fromFlag)
			case fileErr != nil:
				list := defects(t, fileErr)
				if want := "--" + s.Flag + ": " + list[0].Msg; len(list) != 1 || list[0].Path != s.Field || flagErr.Error() != want {
					t.Errorf("%s %q:\nfile %v\nflag %v", s.Flag, v, fileErr, flagErr)
				}
			}
			checked++
		}
	}
	t.Logf("%d values checked against the file", checked)
}

// TestInitiatorSettings checks the list of settings against the fields of
// the file: every flat field has its flag, named after it.
func TestInitiatorSettings(t *testing.T) {
	var fields []string
	for _, f := range initiatorFields {
		switch f {
		case "targets", "discovery_chap":
		case "mpa", "mount", "nop", "log", "metrics":
			for _, sec := range initiatorSections {
				if sec.name == f {
					for _, sf := range sec.fields {
						fields = append(fields, f+"."+sf)
					}
				}
			}
		default:
			fields = append(fields, f)
		}
	}
	settings := InitiatorSettings()
	var got []string
	for _, s := range settings {
		got = append(got, s.Field)
		if want := strings.NewReplacer(".", "-", "_", "-").Replace(s.Field); s.Flag != want {
			t.Errorf("setting %s: flag %s, want %s", s.Field, s.Flag, want)
		}
		if s.Usage == "" {
			t.Errorf("setting %s has no usage", s.Field)
		}
	}
	if !reflect.DeepEqual(got, fields) {
		t.Errorf("settings %v, want the flat fields %v", got, fields)
	}
	settings[0].Flag = "changed"
	if InitiatorSettings()[0].Flag != "initiator-name" {
		t.Errorf("InitiatorSettings shares state")
	}
}

func TestInitiatorFlags(t *testing.T) {
	newFlags := func() (*flag.FlagSet, *strings.Builder, func(*Initiator) error) {
		fs := flag.NewFlagSet("ddpinitiator", flag.ContinueOnError)
		var out strings.Builder
		fs.SetOutput(&out)
		fs.String("config", "", "the configuration file")
		return fs, &out, InitiatorFlags(fs)
	}

	fs, _, apply := newFlags()
	err := fs.Parse([]string{"--config", "x.yaml", "--queue-depth", "32", "--mount-allow-other", "--mpa-crc=false",
		"--nop-timeout", "30s", "--nop-interval=10s", "--log-level", "debug", "rest"})
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultInitiator()
	c.NOP.Interval = 0 // as a file with keepalive off: --nop-interval is applied before --nop-timeout
	if err := apply(c); err != nil {
		t.Fatal(err)
	}
	want := DefaultInitiator()
	want.QueueDepth, want.Mount.AllowOther, want.MPA.CRC = 32, true, false
	want.NOP, want.Log.Level = NOP{10 * time.Second, 30 * time.Second}, "debug"
	if !reflect.DeepEqual(c, want) || fs.Arg(0) != "rest" {
		t.Errorf("after the flags:\n got %+v\nwant %+v", c, want)
	}
	if err := apply(DefaultInitiator()); err != nil { // apply twice, to another configuration
		t.Errorf("apply again: %v", err)
	}

	// A malformed value fails at Parse, naming the flag.
	fs, out, _ := newFlags()
	err = fs.Parse([]string{"--queue-depth", "0"})
	if err == nil || !strings.Contains(err.Error(), `invalid value "0" for flag -queue-depth: queue depth 0 is out of range (1..4096)`) {
		t.Errorf("bad value: %v", err)
	}
	if !strings.Contains(out.String(), "-queue-depth value") {
		t.Errorf("a bad value does not print the usage:\n%s", out)
	}
	// One that does not fit the configuration fails at apply, all of them at once.
	fs, _, apply = newFlags()
	if err := fs.Parse([]string{"--nop-interval", "0", "--nop-timeout", "9s", "--mpa-markers"}); err != nil {
		t.Fatal(err)
	}
	c = DefaultInitiator()
	c.Targets[0].Transport = TransportSCTPUDP
	err = apply(c)
	if err == nil || err.Error() != "--mpa-markers: only tcp targets use MPA, and every target here uses sctp or sctp-udp, which carry DDP without it (RFC 5043)\n"+
		"--nop-timeout: has no effect while the NOP interval is 0 (keepalive off): give --nop-interval too" {
		t.Errorf("apply: %v", err)
	}

	// --help lists them, booleans without a value.
	fs, out, _ = newFlags()
	fs.PrintDefaults()
	for _, s := range InitiatorSettings() {
		line := "-" + s.Flag + " value"
		if s.Bool {
			line = "-" + s.Flag + "\n"
		}
		if !strings.Contains(out.String(), line) || !strings.Contains(out.String(), s.Usage) {
			t.Errorf("--help does not show %q with its usage:\n%s", line, out)
		}
	}

	// A flag name already taken panics, as flag does.
	defer func() {
		if recover() == nil {
			t.Errorf("no panic for a flag defined twice")
		}
	}()
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.Int("queue-depth", 0, "")
	InitiatorFlags(fs)
}

// TestInitiatorAliasBomb checks that nested aliases cannot make a small
// initiator file expand without bound.
func TestInitiatorAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("initiator_name: iqn.2026-11.io.ddpstore:h\ntargets:\n  - name: iqn.2026-11.io.ddpstore:a\n    portals: [h:1]\n    luns: &l [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", i)
	}
	b.WriteString("]\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - {name: iqn.2026-11.io.ddpstore:b%d, portals: [h:1], luns: *l}\n", i)
	}
	_, err := ParseInitiator("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("alias bomb: %.300v", err)
	}
}

// TestInitiatorDocExample checks that the example of docs/config.md is a
// valid configuration, and that the list of flags there is complete.
func TestInitiatorDocExample(t *testing.T) {
	md, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Skipf("no docs/config.md: %v", err)
	}
	_, section, ok := strings.Cut(string(md), "## ddpinitiator\n")
	if !ok {
		t.Fatal("docs/config.md has no ddpinitiator section")
	}
	_, example, _ := strings.Cut(section, "```yaml\n")
	example, _, _ = strings.Cut(example, "```")
	if _, err := ParseInitiator("docs/config.md", []byte(example)); err != nil {
		t.Errorf("the example of docs/config.md is rejected: %v", err)
	}
	for _, s := range InitiatorSettings() {
		if !strings.Contains(section, "`--"+s.Flag+"`") {
			t.Errorf("docs/config.md does not list --%s", s.Flag)
		}
	}
}

func TestParseMultipath(t *testing.T) {
	doc := "initiator_name: iqn.2026-11.io.x:h\ntargets:\n" +
		"  - {name: iqn.2026-11.io.x:a, portals: [127.0.0.1:3260, 127.0.0.2:3260], multipath: round-robin}\n" +
		"  - {name: iqn.2026-11.io.x:b, portals: [127.0.0.1:3261, 127.0.0.2:3261], multipath: failover}\n" +
		"  - {name: iqn.2026-11.io.x:c, portals: [127.0.0.1:3262]}\n"
	c, err := ParseInitiator("mp.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false} {
		if c.Targets[i].RoundRobin != want {
			t.Errorf("targets[%d].RoundRobin = %v", i, c.Targets[i].RoundRobin)
		}
	}
	for _, bad := range []struct{ doc, msg string }{
		{"  - {name: iqn.2026-11.io.x:a, portals: [127.0.0.1:3260], multipath: round-robin}\n", "targets[0].multipath: round-robin needs at least two portals"},
		{"  - {name: iqn.2026-11.io.x:a, portals: [127.0.0.1:3260, 127.0.0.2:3260], multipath: random}\n", "targets[0].multipath:"},
	} {
		_, err := ParseInitiator("mp.yaml", []byte("initiator_name: iqn.2026-11.io.x:h\ntargets:\n"+bad.doc))
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: %v, want %q", bad.doc, err, bad.msg)
		}
	}
}
