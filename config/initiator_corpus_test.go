package config

import (
	"fmt"
	"strings"
	"testing"
)

// initiatorCorpusBase is a valid initiator configuration touching every
// field, one field per line, tagged (#@tag) as corpusBase is.
const initiatorCorpusBase = `# base of the initiator's malformed corpus
initiator_name: iqn.2026-11.io.ddpstore:host1   #@iname
targets:                                        #@targets
  - name: iqn.2026-11.io.ddpstore:disk1         #@name0
    portals:                                    #@portals0
      - 127.0.0.1:3260                          #@portal00
      - "[::1]:3260"                            #@portal01
    transport: tcp                              #@transport0
    luns:                                       #@luns0
      - 0                                       #@lun00
      - 1                                       #@lun01
    chap:                                       #@chap
      user: alice                               #@user
      secret: alice-secret-1                    #@secret
      mutual_user: disk1                        #@muser
      mutual_secret: target-secret-1            #@msecret
  - name: naa.52004567ba64678d                  #@name1
    portals: [storage.example.com:3261]         #@portals1
    transport: sctp                             #@transport1
    luns: [7]                                   #@luns1
discovery_chap:                                 #@dchap
  user: discovery                               #@duser
  secret: discovery-secret                      #@dsecret
queue_depth: 128                                #@qd
buffers: 64MiB                                  #@buffers
mpa:                                            #@mpa
  revision: 2                                   #@revision
  markers: false                                #@markers
  crc: true                                     #@crc
mount:                                          #@mount
  direct_io: true                               #@directio
  max_write: 1MiB                               #@maxwrite
  allow_other: false                            #@allowother
  io_uring: auto                                #@iouring
recovery_timeout: 30s                           #@recovery
nop:                                            #@nop
  interval: 5s                                  #@interval
  timeout: 15s                                  #@timeout
log:                                            #@log
  level: info                                   #@level
  format: text                                  #@format
metrics:                                        #@metrics
  listen: 127.0.0.1:9741                        #@mlisten
`

func initiatorDoc() *doc { return newDoc(initiatorCorpusBase) }

// initiatorCorpus generates the malformed initiator documents from tables of
// mutations of initiatorCorpusBase. It is deterministic.
func initiatorCorpus() []corpusCase {
	var cases []corpusCase
	addDoc := func(name string, d *doc, lineTag, want string) {
		cases = append(cases, corpusCase{name, d.String(), d.line(lineTag), want})
	}
	base := initiatorDoc()

	// Bad values, line by line.
	values := []fieldValues{
		{"iname", "initiator_name", []valueCase{
			{"IQN.2026-11.io.ddpstore:host1", "lower-case"},
			{"host1", "must start with iqn., eui. or naa."},
			{"iqn.2026-13.io.ddpstore:host1", "month 13"},
			{"iqn.2026-11.io.ddpstore:host_1", "'_' is not allowed"},
			{"eui.123", "16 hex digits"},
			{"iqn.2026-11.io.ddpstore:" + strings.Repeat("h", 200), "the limit is 223"},
			{"[iqn.2026-11.io.ddpstore:host1]", "expected an iSCSI name, found a list"},
			{"{name: x}", "found a mapping"},
			{"''", "empty: expected an iSCSI name"},
			{"~", "no value: expected an iSCSI name"},
			{"!!binary aGVsbG8=", "the tag !!binary is not supported"},
		}},
		{"name0", "targets[0].name", []valueCase{
			{"iqn.2026-11.io.ddpstore:Disk1", "lower-case"},
			{"iqn.26-11.io.ddpstore:disk1", "is not a date YYYY-MM"},
			{"iqn.2026-11", "the reversed domain name after the date is missing"},
			{"'iqn.2026-11.io.ddpstore:disk 1'", "' ' is not allowed"},
			{"naa.123456789012345", "16 or 32 hex digits"},
			{"disk1", "must start with iqn., eui. or naa."},
			{"~", "no value"},
		}},
		{"name1", "targets[1].name", []valueCase{
			{"iqn.2026-11.io.ddpstore:disk1", `duplicate target "iqn.2026-11.io.ddpstore:disk1" (first at line 4)`},
		}},
		{"portal00", "targets[0].portals[0]", []valueCase{
			{"127.0.0.1", "has no port: write host:port, as 127.0.0.1:3260"},
			{"':3260'", `":3260" has no host: write the address to dial, as 127.0.0.1:3260`},
			{"0.0.0.0:3260", "is the every-address wildcard, which only a listener binds to"},
			{"'[::]:3260'", "is the every-address wildcard"},
			{"127.0.0.1:0", "out of range (1..65535)"},
			{"127.0.0.1:65536", "out of range (1..65535)"},
			{"::1:3260", "write an IPv6 address in brackets"},
			{"'[127.0.0.1]:3260'", "brackets are for IPv6 addresses"},
			{"host_name:3260", "'_' may not appear"},
			{"127.0.0.1:iscsi", "is not a number"},
			{"300.1.1.1:3260", "is not an IPv4 address"},
			{"[a, b]", "expected host:port, found a list"},
			{"{host: a}", "expected host:port, found a mapping"},
			{"''", "empty: expected host:port"},
			{"~", "no value: expected host:port"},
			{"3260", "has no port"},
		}},
		{"portal01", "targets[0].portals[1]", []valueCase{
			{"127.0.0.1:3260", "duplicate portal 127.0.0.1:3260 (first at line 6)"},
			{"127.0.0.1:03260", "duplicate portal 127.0.0.1:03260 (first at line 6)"},
			{"'[0::0]:3260'", "is the every-address wildcard"},
			{"'[::1]'", "has no port"},
		}},
		{"portals1", "targets[1].portals", []valueCase{
			{"[]", "empty: a target needs at least one address to dial"},
			{"storage.example.com:3261", `expected a list of host:port addresses, found the string "storage.example.com:3261"`},
			{"{listen: a}", "expected a list of host:port addresses, found a mapping"},
			{"~", "expected a list of host:port addresses, found an empty value"},
		}},
		{"transport0", "targets[0].transport", []valueCase{
			{"udp", `"udp" is not a transport; use tcp, sctp, sctp-udp or iscsi-tcp`},
			{"TCP", `(did you mean "tcp"?)`},
			{"sctp_udp", `(did you mean "sctp-udp"?)`},
			{"iser", `"iser" is not a transport`},
			{"[tcp]", "found a list"},
			{"~", "no value"},
		}},
		{"lun00", "targets[0].luns[0]", []valueCase{
			{"16384", "LUN 16384 is out of range (0..16383)"},
			{"-1", "LUN -1 is out of range (0..16383)"},
			{"'0'", "(remove the quotes)"},
			{"1.5", "the number 1.5 is not an integer"},
			{"x", `the string "x" is not an integer`},
			{"all", `the string "all" is not an integer`},
			{"~", "no value: expected an integer"},
			{"[0]", "expected an integer, found a list"},
			{"{id: 0}", "expected a LUN number, found a mapping (luns lists the numbers of the LUNs to use"},
			{"99999999999999999999", "is out of range (0..16383)"},
		}},
		{"lun01", "targets[0].luns[1]", []valueCase{
			{"0", "duplicate LUN 0 (first at line 10)"},
			{"0x0", "duplicate LUN 0 (first at line 10)"},
		}},
		{"luns1", "targets[1].luns", []valueCase{
			{"7", "expected a list of LUN numbers, found the integer 7"},
			{"all", `expected a list of LUN numbers, found the string "all"`},
			{"{id: 7}", "expected a list of LUN numbers, found a mapping"},
		}},
		{"qd", "queue_depth", []valueCase{
			{"0", "queue depth 0 is out of range (1..4096)"},
			{"4097", "queue depth 4097 is out of range (1..4096)"},
			{"-1", "out of range"},
			{"'128'", "(remove the quotes)"},
			{"1.5", "is not an integer"},
			{"deep", "is not an integer"},
			{"[]", "found a list"},
			{"~", "no value"},
		}},
		{"buffers", "buffers", []valueCase{
			{"512KiB", "buffers 512KiB is out of range (1MiB..4GiB)"},
			{"8GiB", "buffers 8GiB is out of range (1MiB..4GiB)"},
			{"0", "buffers 0B is out of range"},
			{"1025KiB", "buffers 1025KiB is not a multiple of 4KiB (use 1MiB or 1028KiB)"},
			{"1048577", "is not a multiple of 4KiB"},
			{"64MB", "the unit is MiB"},
			{"-1MiB", "sizes cannot be negative"},
			{"12QB", "is not a size"},
			{"1.5", "the number 1.5 is not a size"},
			{"true", "the boolean true is not a size"},
			{"[64MiB]", "expected a size, found a list"},
			{"~", "no value: expected a size"},
		}},
		{"revision", "mpa.revision", []valueCase{
			{"0", "MPA revision 0 is out of range (1..2)"},
			{"3", "MPA revision 3 is out of range (1..2)"},
			{"'2'", "(remove the quotes)"},
			{"two", "is not an integer"},
		}},
		{"markers", "mpa.markers", []valueCase{
			{"yes", `the string "yes" is not a boolean (use true or false)`},
			{"1", "the integer 1 is not a boolean"},
			{"'false'", "(remove the quotes)"},
		}},
		{"crc", "mpa.crc", []valueCase{
			{"on", "is not a boolean"},
			{"~", "no value"},
		}},
		{"directio", "mount.direct_io", []valueCase{
			{"yes", "is not a boolean"},
			{"1", "is not a boolean"},
			{"'true'", "(remove the quotes)"},
			{"[true]", "found a list"},
		}},
		{"maxwrite", "mount.max_write", []valueCase{
			{"2MiB", "max write 2MiB is out of range (4KiB..1MiB): FUSE passes at most 256 pages at once"},
			{"0", "max write 0B is out of range"},
			{"1000", "max write 1000B is out of range (4KiB..1MiB)"},
			{"6KiB", "max write 6KiB is not a multiple of 4KiB (use 4KiB or 8KiB)"},
			{"1MB", "the unit is MiB"},
			{"big", "is not a size"},
		}},
		{"allowother", "mount.allow_other", []valueCase{
			{"yes", "is not a boolean"},
			{"'false'", "(remove the quotes)"},
		}},
		{"iouring", "mount.io_uring", []valueCase{
			{"yes", `"yes" is not an io_uring mode; use auto, on or off`},
			{"true", "is not an io_uring mode"},
			{"autp", `(did you mean "auto"?)`},
		}},
		{"recovery", "recovery_timeout", []valueCase{
			{"30", "30 has no unit: write 30s for seconds"},
			{"0", "recovery timeout 0 is out of range (1s..1h)"},
			{"0s", "recovery timeout 0s is out of range (1s..1h)"},
			{"500ms", "recovery timeout 500ms is out of range (1s..1h)"},
			{"2h", "recovery timeout 2h is out of range (1s..1h)"},
			{"1h0m1s", "recovery timeout 1h0m1s is out of range (1s..1h)"},
			{"-30s", "recovery timeout -30s is negative (1s..1h)"},
			{"1d", `unknown unit "d" (a day is 24h)`},
			{"30 s", "write it without spaces, as 30s"},
			{"30secs", `unknown unit "secs" (write s for seconds)`},
			{"30S", "units are lower-case: write s"},
			{"soon", `"soon" is not a duration`},
			{"true", "the boolean true is not a duration"},
			{"2026-11-01", "the date 2026-11-01 is not a duration"},
			{"[30s]", "expected a duration, found a list"},
			{"~", "no value: expected a duration"},
			{"''", "empty: expected a duration"},
			{"99999999999999h", "recovery timeout 99999999999999h is out of range (1s..1h)"},
			{"1.5", "1.5 has no unit"},
		}},
		{"interval", "nop.interval", []valueCase{
			{"-5s", "NOP interval -5s is negative (0, which turns keepalive off, or 1s..1h)"},
			{"2h", "NOP interval 2h is out of range (0, which turns keepalive off, or 1s..1h)"},
			{"500ms", "is out of range"},
			{"5", "5 has no unit"},
			{"off", `"off" is not a duration`},
			{"false", "the boolean false is not a duration"},
			{"~", "no value"},
		}},
		{"timeout", "nop.timeout", []valueCase{
			{"0", "NOP timeout 0 is out of range (1s..1h)"},
			{"0s", "NOP timeout 0s is out of range (1s..1h)"},
			{"2h", "out of range (1s..1h)"},
			{"-1s", "is negative (1s..1h)"},
			{"15", "15 has no unit"},
			{"1w", `unknown unit "w"`},
		}},
		{"level", "log.level", []valueCase{
			{"INFO", `(did you mean "info"?)`},
			{"warning", `(did you mean "warn"?)`},
			{"verbose", `"verbose" is not a log level; use panic, fatal, error, warn, info, debug or trace`},
			{"~", "no value"},
		}},
		{"format", "log.format", []valueCase{
			{"yaml", `"yaml" is not a log format; use text or json`},
			{"JSON", `(did you mean "json"?)`},
		}},
	}
	for _, v := range append(values, chapValues(23)...) {
		for i, c := range v.cases {
			addDoc(fmt.Sprintf("value-%s-%d", v.tag, i), initiatorDoc().set(v.tag, c.value), v.tag, v.path+": "+c.want)
		}
	}

	// Unknown fields, in each mapping.
	unknown := []struct{ after, field, path, want string }{
		{"iname", "initiator: x", "", `unknown field "initiator" (did you mean "initiator_name"?); the fields of an initiator configuration are initiator_name, targets, discovery_chap, queue_depth, buffers, mpa, mount, recovery_timeout, nop, log and metrics`},
		{"qd", "queuedepth: 1", "", `unknown field "queuedepth" (did you mean "queue_depth"?)`},
		{"qd", "iodepth: 32", "", `unknown field "iodepth"; the fields of an initiator configuration are`},
		{"recovery", "recovery-timeout: 30s", "", `unknown field "recovery-timeout" (did you mean "recovery_timeout"?)`},
		{"buffers", "buffer: 64MiB", "", `unknown field "buffer" (did you mean "buffers"?)`},
		{"name0", "portal: 127.0.0.1:3260", "targets[0]", `unknown field "portal" (did you mean "portals"?); the fields of a target are name, portals, transport, luns, chap, header_digest, data_digest and multipath`},
		{"name0", "alias: disk1", "targets[0]", `unknown field "alias"; the fields of a target are name, portals, transport, luns, chap, header_digest, data_digest and multipath`},
		{"transport0", "lun: 0", "targets[0]", `unknown field "lun" (did you mean "luns"?)`},
		{"name1", "initiators: []", "targets[1]", `unknown field "initiators"`},
		{"user", "password: x", "targets[0].chap", `unknown field "password"; the fields of chap are user, secret, mutual_user and mutual_secret`},
		{"duser", "mutual: true", "discovery_chap", `unknown field "mutual"`},
		{"revision", "marker: true", "mpa", `unknown field "marker" (did you mean "markers"?); the fields of mpa are revision, markers and crc`},
		{"directio", "maxwrite: 1MiB", "mount", `unknown field "maxwrite" (did you mean "max_write"?); the fields of mount are direct_io, max_write, allow_other and io_uring`},
		{"allowother", "fsname: ddp", "mount", `unknown field "fsname"`},
		{"directio", "directio: true", "mount", `(did you mean "direct_io"?)`},
		{"interval", "intervall: 5s", "nop", `unknown field "intervall" (did you mean "interval"?); the fields of nop are interval and timeout`},
		{"timeout", "retries: 3", "nop", `unknown field "retries"`},
		{"level", "color: true", "log", `unknown field "color"; the fields of log are level and format`},
	}
	for i, u := range unknown {
		want := u.want
		if u.path != "" {
			want = u.path + ": " + want
		}
		addDoc(fmt.Sprintf("unknown-%d", i), initiatorDoc().insertAfter(u.after, "new", u.field), "new", want)
	}

	// Duplicate fields: every scalar field written twice.
	dups := []struct{ tag, path, field string }{
		{"iname", "", "initiator_name"}, {"name0", "targets[0]", "name"}, {"transport0", "targets[0]", "transport"},
		{"user", "targets[0].chap", "user"}, {"secret", "targets[0].chap", "secret"},
		{"muser", "targets[0].chap", "mutual_user"}, {"msecret", "targets[0].chap", "mutual_secret"},
		{"name1", "targets[1]", "name"}, {"portals1", "targets[1]", "portals"}, {"transport1", "targets[1]", "transport"},
		{"luns1", "targets[1]", "luns"}, {"duser", "discovery_chap", "user"}, {"dsecret", "discovery_chap", "secret"},
		{"qd", "", "queue_depth"}, {"buffers", "", "buffers"}, {"revision", "mpa", "revision"}, {"markers", "mpa", "markers"},
		{"crc", "mpa", "crc"}, {"directio", "mount", "direct_io"}, {"maxwrite", "mount", "max_write"},
		{"allowother", "mount", "allow_other"}, {"iouring", "mount", "io_uring"}, {"recovery", "", "recovery_timeout"}, {"interval", "nop", "interval"},
		{"timeout", "nop", "timeout"}, {"level", "log", "level"}, {"format", "log", "format"},
	}
	for _, c := range dups {
		want := fmt.Sprintf("duplicate field %q (first at line %d)", c.field, base.line(c.tag))
		if c.path != "" {
			want = c.path + ": " + want
		}
		addDoc("dup-"+c.tag, initiatorDoc().dupAfter(c.tag), "dup", want)
	}
	for _, sec := range []struct{ field, tag string }{{"mpa", "mpa"}, {"mount", "mount"}, {"nop", "nop"}, {"log", "log"}, {"targets", "targets"}, {"discovery_chap", "dchap"}} {
		addDoc("dup-section-"+sec.field, initiatorDoc().insertAfter("format", "new", "x: 1").replace("new", sec.field+": {}"), "new",
			fmt.Sprintf(`duplicate field %q (first at line %d)`, sec.field, base.line(sec.tag)))
	}
	addDoc("dup-target-chap", initiatorDoc().insertAfter("msecret", "new", "x: 1").replace("new", "    chap: {}"), "new", `targets[0]: duplicate field "chap" (first at line 12)`)
	addDoc("dup-target-luns", initiatorDoc().insertAfter("lun01", "new", "x: 1").replace("new", "    luns: []"), "new", `targets[0]: duplicate field "luns" (first at line 9)`)

	// Missing fields and impossible combinations.
	addDoc("missing-initiator-name", initiatorDoc().del("iname"), "targets", "initiator_name: missing: this host needs an iSCSI name of its own")
	addDoc("missing-targets", initiatorDoc().delRange("targets", "luns1"), "iname", "targets: missing: an initiator logs in to at least one target")
	addDoc("misspelt-name", initiatorDoc().replace("name0", "  - nam: iqn.2026-11.io.ddpstore:disk1"), "name0", `targets[0]: unknown field "nam" (did you mean "name"?)`)
	addDoc("missing-name", initiatorDoc().replace("name0", "  - transport: tcp").del("transport0"), "name0", "targets[0].name: missing: a target needs its iSCSI name")
	addDoc("missing-portals", initiatorDoc().del("portals0", "portal00", "portal01"), "name0", "targets[0].portals: missing: a target needs at least one address to dial")
	addDoc("missing-portals1", initiatorDoc().del("portals1"), "name1", "targets[1].portals: missing")
	addDoc("empty-portals", initiatorDoc().del("portal00", "portal01").set("portals0", "[]"), "portals0", "targets[0].portals: empty: a target needs at least one address to dial")
	addDoc("null-portals", initiatorDoc().del("portal00", "portal01"), "portals0", "targets[0].portals: expected a list of host:port addresses, found an empty value")
	addDoc("empty-targets", initiatorDoc().delRange("name0", "luns1").set("targets", "[]"), "targets", "targets: empty: an initiator logs in to at least one target")
	addDoc("null-luns", initiatorDoc().del("lun00", "lun01"), "luns0", "targets[0].luns: expected a list of LUN numbers, found an empty value")
	addDoc("missing-secret", initiatorDoc().del("secret"), "chap", "targets[0].chap: user without secret: give both")
	addDoc("missing-user", initiatorDoc().del("user"), "chap", "targets[0].chap: secret without user: give both")
	addDoc("missing-one-way", initiatorDoc().del("user", "secret"), "chap", "targets[0].chap: mutual CHAP needs one-way CHAP too")
	addDoc("missing-mutual-secret", initiatorDoc().del("msecret"), "chap", "targets[0].chap: mutual_user without mutual_secret: give both")
	addDoc("missing-discovery-secret", initiatorDoc().del("dsecret"), "dchap", "discovery_chap: user without secret")
	addDoc("chap-empty", initiatorDoc().del("user", "secret", "muser", "msecret").set("chap", "{}"), "chap", "targets[0].chap: no credentials")

	// Cross-checks.
	addDoc("mpa-without-tcp", initiatorDoc().set("transport0", "sctp-udp"), "mpa", "mpa: only tcp targets use MPA, and every target here uses sctp or sctp-udp")
	addDoc("nop-timeout-off", initiatorDoc().set("interval", "0"), "timeout", "nop.timeout: has no effect while nop.interval is 0 (keepalive off)")
	addDoc("nop-timeout-off-0s", initiatorDoc().set("interval", "0s"), "timeout", "nop.timeout: has no effect while nop.interval is 0")
	addDoc("nop-flow-off", initiatorDoc().del("interval", "timeout").set("nop", "{interval: 0, timeout: 15s}"), "nop", "nop.timeout: has no effect")
	addDoc("same-secret-discovery", initiatorDoc().set("dsecret", "target-secret-1"), "msecret", "targets[0].chap.mutual_secret: the same as discovery_chap.secret (line 23)")

	// Wrong types for whole sections.
	addDoc("targets-scalar", initiatorDoc().delRange("name0", "luns1").set("targets", "iqn.2026-11.io.ddpstore:disk1"), "targets", "targets: expected a list of targets, found the string")
	addDoc("targets-mapping", initiatorDoc().delRange("name0", "luns1").set("targets", "{name: x}"), "targets", "targets: expected a list of targets, found a mapping")
	addDoc("target-scalar", initiatorDoc().delRange("name1", "luns1").insertAfter("msecret", "new", "x").replace("new", "  - iqn.2026-11.io.ddpstore:disk2"), "new", "targets[1]: expected a mapping (a target: name, portals, transport, luns, chap, header_digest, data_digest, multipath), found the string")
	addDoc("chap-scalar", initiatorDoc().del("user", "secret", "muser", "msecret").set("chap", "alice"), "chap", "targets[0].chap: expected a mapping (chap: user, secret, mutual_user, mutual_secret)")
	addDoc("mpa-scalar", initiatorDoc().del("revision", "markers", "crc").set("mpa", "2"), "mpa", "mpa: expected a mapping (mpa: revision, markers, crc), found the integer 2")
	addDoc("mount-scalar", initiatorDoc().del("directio", "maxwrite", "allowother", "iouring").set("mount", "/mnt/ddp"), "mount", `mount: expected a mapping (mount: direct_io, max_write, allow_other, io_uring), found the string "/mnt/ddp"`)
	addDoc("nop-list", initiatorDoc().del("interval", "timeout").set("nop", "[5s, 15s]"), "nop", "nop: expected a mapping (nop: interval, timeout), found a list")
	addDoc("nop-duration", initiatorDoc().del("interval", "timeout").set("nop", "5s"), "nop", `nop: expected a mapping (nop: interval, timeout), found the string "5s"`)
	addDoc("log-scalar", initiatorDoc().del("level", "format").set("log", "debug"), "log", `log: expected a mapping (log: level, format), found the string "debug"`)
	addDoc("dchap-list", initiatorDoc().del("duser", "dsecret").set("dchap", "[a, b]"), "dchap", "discovery_chap: expected a mapping (chap: user, secret, mutual_user, mutual_secret), found a list")

	// Flow style.
	addDoc("flow-target-dup", initiatorDoc().delRange("name1", "luns1").insertAfter("msecret", "new", "x").replace("new", "  - {name: eui.02004567a425678d, portals: [a:1], name: eui.02004567a425678e}"), "new", `targets[1]: duplicate field "name" (first at line 17, column 6)`)
	addDoc("flow-target-wildcard", initiatorDoc().set("portals1", "[a:1, '0.0.0.0:1']"), "portals1", "targets[1].portals[1]: \"0.0.0.0:1\" is the every-address wildcard")
	addDoc("flow-portals-dup", initiatorDoc().set("portals1", "[a:1, A:1]"), "portals1", "targets[1].portals[1]: duplicate portal A:1 (first at line 18, column 15)")
	addDoc("flow-luns-dup", initiatorDoc().set("luns1", "[7, 8, 7]"), "luns1", "targets[1].luns[2]: duplicate LUN 7 (first at line 20, column 12)")
	addDoc("flow-luns-range", initiatorDoc().set("luns1", "[7, 20000]"), "luns1", "targets[1].luns[1]: LUN 20000 is out of range (0..16383)")
	addDoc("flow-mount", initiatorDoc().del("directio", "maxwrite", "allowother", "iouring").set("mount", "{direct_io: yes, max_write: 1MiB}"), "mount", "mount.direct_io: the string \"yes\" is not a boolean")

	// YAML itself.
	addDoc("syntax-colon", initiatorDoc().set("iname", "iqn.2026-11.io.ddpstore: host1"), "iname", "YAML syntax: mapping values are not allowed in this context")
	addDoc("syntax-tab", initiatorDoc().replace("level", "\tlevel: info"), "level", "(a tab indents this line: YAML indents with spaces only)")
	addDoc("syntax-indent", initiatorDoc().replace("transport0", "     transport: tcp"), "transport0", "YAML syntax:")
	addDoc("syntax-quote", initiatorDoc().set("recovery", `"30s`), "recovery", "YAML syntax: found unexpected end of stream")
	addDoc("syntax-flow", initiatorDoc().set("portals1", "[storage.example.com:3261"), "portals1", "YAML syntax:")
	addDoc("syntax-anchor", initiatorDoc().set("qd", "*depth"), "qd", "YAML syntax: unknown anchor 'depth' referenced")
	addDoc("syntax-control", initiatorDoc().set("user", "alice\x01"), "user", "YAML syntax: control characters are not allowed")
	addDoc("merge-key", initiatorDoc().insertAfter("name0", "new", "<<: {transport: tcp}"), "new", "targets[0]: merge keys (<<) are not supported")
	addDoc("list-key", initiatorDoc().insertAfter("directio", "new", "[a]: b"), "new", "mount: a key must be a field name, found a list")
	addDoc("second-document", initiatorDoc().insertAfter("format", "new", "x").replace("new", "---"), "new", "a second YAML document starts here")
	addDoc("document-list", newDoc("# a list\n- initiator_name: x #@new\n"), "new", "expected a mapping (an initiator configuration")
	return cases
}

// TestInitiatorMalformedCorpus checks that each generated malformed
// initiator document is rejected with its defects at exactly the right line,
// with no cascade of defects elsewhere.
func TestInitiatorMalformedCorpus(t *testing.T) {
	base, err := ParseInitiator("base.yaml", []byte(initiatorCorpusBase))
	if err != nil {
		t.Fatalf("the corpus base is not valid: %v", err)
	}
	if base.Targets[0].CHAP == nil || base.DiscoveryCHAP == nil || len(base.Targets) != 2 || len(base.Targets[0].Portals) != 2 || len(base.Targets[0].LUNs) != 2 {
		t.Fatalf("the corpus base lost fields: %+v", base)
	}
	checkCorpus(t, "initiator-corpus", initiatorCorpus(), func(file string, text []byte) error {
		_, err := ParseInitiator(file, text)
		return err
	})
}
