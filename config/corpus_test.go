package config

import (
	"fmt"
	"strings"
	"testing"
)

// corpusBase is a valid configuration touching every field, one field per
// line. Each line is tagged (#@tag) so that mutations can name the lines they
// change and the line the defect must be reported at.
const corpusBase = `# base of the malformed corpus
portals:                                      #@portals
  - listen: 127.0.0.1:3260                    #@listen0
    transport: tcp                            #@transport0
    mpa:                                      #@mpa
      revision: 2                             #@revision
      markers: false                          #@markers
      crc: true                               #@crc
  - listen: "[::1]:3261"                      #@listen1
    transport: sctp                           #@transport1
targets:                                      #@targets
  - name: iqn.2026-11.io.ddpstore:disk1       #@name0
    alias: disk1                              #@alias
    luns:                                     #@luns0
      - id: 0                                 #@id0
        path: /var/lib/ddpstore/disk1.img     #@path0
        size: 1GiB                            #@size0
      - id: 1                                 #@id1
        memory: 256MiB                        #@memory1
      - id: 2                                 #@id2
        path: /dev/sdb                        #@path2
        readonly: true                        #@readonly2
    initiators:                               #@initiators
      - iqn.2026-11.io.ddpstore:host1         #@init0
      - eui.02004567a425678d                  #@init1
    chap:                                     #@chap
      user: alice                             #@user
      secret: alice-secret-1                  #@secret
      mutual_user: disk1                      #@muser
      mutual_secret: target-secret-1          #@msecret
  - name: naa.52004567ba64678d                #@name1
    luns:                                     #@luns1
      - {id: 0, memory: 1MiB}                 #@flowlun
discovery_chap:                               #@dchap
  user: discovery                             #@duser
  secret: discovery-secret                    #@dsecret
limits:                                       #@limits
  max_sessions: 64                            #@maxsessions
  queue_depth: 128                            #@queuedepth
log:                                          #@log
  level: info                                 #@level
  format: text                                #@format
metrics:                                      #@metrics
  listen: 127.0.0.1:9740                      #@mlisten
control:                                      #@control
  socket: /run/ddpstore/ddptarget.sock        #@socket
`

// doc is a corpus document being mutated: its lines, each with its tag.
type doc struct {
	lines []string
	tags  []string
}

func baseDoc() *doc { return newDoc(corpusBase) }

// newDoc splits a tagged document into a doc to mutate.
func newDoc(text string) *doc {
	d := &doc{}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		tag := ""
		if i := strings.Index(l, "#@"); i >= 0 {
			tag = l[i+2:]
			l = strings.TrimRight(l[:i], " ")
		}
		d.lines = append(d.lines, l)
		d.tags = append(d.tags, tag)
	}
	return d
}

// at returns the index of the line tagged tag.
func (d *doc) at(tag string) int {
	for i, t := range d.tags {
		if t == tag {
			return i
		}
	}
	panic("no line tagged " + tag)
}

// line returns the 1-based line number of tag.
func (d *doc) line(tag string) int { return d.at(tag) + 1 }

// set replaces the value on the line tagged tag (after "key: ", or after
// "- " for a list item).
func (d *doc) set(tag, value string) *doc {
	i := d.at(tag)
	l := d.lines[i]
	if j := strings.Index(l, ": "); j >= 0 {
		d.lines[i] = l[:j+2] + value
	} else if j := strings.Index(l, "- "); j >= 0 {
		d.lines[i] = l[:j+2] + value
	} else {
		d.lines[i] = l + " " + value
	}
	return d
}

// replace replaces the whole line tagged tag.
func (d *doc) replace(tag, text string) *doc {
	d.lines[d.at(tag)] = text
	return d
}

// keyIndent is the indentation of the key on the line tagged tag.
func (d *doc) keyIndent(tag string) string {
	l := d.lines[d.at(tag)]
	n := len(l) - len(strings.TrimLeft(l, " "))
	if strings.HasPrefix(l[n:], "- ") {
		n += 2
	}
	return strings.Repeat(" ", n)
}

// insertAfter adds text as a sibling field after the line tagged tag and
// tags it newTag.
func (d *doc) insertAfter(tag, newTag, text string) *doc {
	i := d.at(tag) + 1
	d.lines = append(d.lines[:i], append([]string{d.keyIndent(tag) + text}, d.lines[i:]...)...)
	d.tags = append(d.tags[:i], append([]string{newTag}, d.tags[i:]...)...)
	return d
}

// dupAfter repeats the field on the line tagged tag right after it, tagged "dup".
func (d *doc) dupAfter(tag string) *doc {
	l := d.lines[d.at(tag)]
	field := strings.TrimPrefix(strings.TrimLeft(l, " "), "- ")
	return d.insertAfter(tag, "dup", field)
}

// del removes the lines with the given tags.
func (d *doc) del(tags ...string) *doc {
	for _, tag := range tags {
		i := d.at(tag)
		d.lines = append(d.lines[:i], d.lines[i+1:]...)
		d.tags = append(d.tags[:i], d.tags[i+1:]...)
	}
	return d
}

// delRange removes the lines from tag first to tag last, both included.
func (d *doc) delRange(first, last string) *doc {
	i, j := d.at(first), d.at(last)
	d.lines = append(d.lines[:i], d.lines[j+1:]...)
	d.tags = append(d.tags[:i], d.tags[j+1:]...)
	return d
}

func (d *doc) String() string { return strings.Join(d.lines, "\n") + "\n" }

// corpusCase is one malformed document: it must be rejected with every
// defect on line, and some defect's message (path: message) holding want.
type corpusCase struct {
	name string
	text string
	line int
	want string
}

// valueCase is a bad value for a tagged line.
type valueCase struct{ value, want string }

// fieldValues are the bad values tried on the line tagged tag, whose field
// is at path.
type fieldValues struct {
	tag, path string
	cases     []valueCase
}

// chapValues are the bad CHAP values both configurations' corpora try, on
// the lines tagged user, secret, msecret and dsecret; discoveryLine is the
// line of discovery_chap.secret.
func chapValues(discoveryLine int) []fieldValues {
	return []fieldValues{
		{"user", "targets[0].chap.user", []valueCase{
			{"''", "empty: expected a CHAP user name"},
			{"[u]", "found a list"},
			{strings.Repeat("u", 256), "256 octets long, the limit is 255"},
		}},
		{"secret", "targets[0].chap.secret", []valueCase{
			{"short", "too short (5 octets)"},
			{"12345678901", "too short (11 octets)"},
			{"''", "empty: expected a CHAP secret"},
			{"{a: b}", "found a mapping"},
		}},
		{"msecret", "targets[0].chap.mutual_secret", []valueCase{
			{"alice-secret-1", "the same as secret: RFC 7143 section 9.2.1 forbids"},
			{"discovery-secret", fmt.Sprintf("the same as discovery_chap.secret (line %d)", discoveryLine)},
			{"tiny", "too short (4 octets)"},
		}},
		{"dsecret", "discovery_chap.secret", []valueCase{
			{"tiny", "too short (4 octets)"},
			{"~", "no value"},
		}},
	}
}

// corpus generates the malformed documents from tables of mutations of
// corpusBase. It is deterministic: the same cases in the same order.
func corpus() []corpusCase {
	var cases []corpusCase
	addDoc := func(name string, d *doc, lineTag, want string) {
		cases = append(cases, corpusCase{name, d.String(), d.line(lineTag), want})
	}

	// Bad values, line by line: wrong types, out of range, bad syntax.
	values := []fieldValues{
		{"listen0", "portals[0].listen", []valueCase{
			{"127.0.0.1", "has no port"},
			{"127.0.0.1:0", "out of range (1..65535)"},
			{"127.0.0.1:65536", "out of range (1..65535)"},
			{"::1:3260", "write an IPv6 address in brackets"},
			{"'[127.0.0.1]:3260'", "brackets are for IPv6 addresses"},
			{"host_name:3260", "'_' may not appear"},
			{"127.0.0.1:iscsi", "is not a number"},
			{"300.1.1.1:3260", "is not an IPv4 address"},
			{"'[::1]'", "has no port"},
			{"[a, b]", "expected host:port, found a list"},
			{"{host: a}", "expected host:port, found a mapping"},
			{"''", "empty: expected host:port"},
			{"~", "no value: expected host:port"},
		}},
		{"transport0", "portals[0].transport", []valueCase{
			{"udp", `"udp" is not a transport; use tcp, sctp, sctp-udp or iscsi-tcp`},
			{"TCP", `(did you mean "tcp"?)`},
			{"sctp_udp", `(did you mean "sctp-udp"?)`},
			{"[tcp]", "found a list"},
			{"1", `"1" is not a transport`},
			{"~", "no value"},
		}},
		{"revision", "portals[0].mpa.revision", []valueCase{
			{"0", "MPA revision 0 is out of range (1..2): 1 is RFC 5044, 2 adds the RFC 6581 startup"},
			{"3", "MPA revision 3 is out of range (1..2)"},
			{"'2'", `the string "2" is not an integer (remove the quotes)`},
			{"2.0", "the number 2.0 is not an integer"},
			{"-1", "MPA revision -1 is out of range (1..2)"},
			{"true", "the boolean true is not an integer"},
			{"99999999999999999999", "is out of range"},
		}},
		{"markers", "portals[0].mpa.markers", []valueCase{
			{"yes", `the string "yes" is not a boolean (use true or false)`},
			{"1", "the integer 1 is not a boolean"},
			{"'false'", "(remove the quotes)"},
			{"[]", "found a list"},
			{"null", "no value"},
		}},
		{"crc", "portals[0].mpa.crc", []valueCase{
			{"no", "is not a boolean"},
			{"0", "is not a boolean"},
			{"on", "is not a boolean"},
		}},
		{"name0", "targets[0].name", []valueCase{
			{"iqn.2026-13.io.ddpstore:disk1", "month 13"},
			{"IQN.2026-11.io.ddpstore:disk1", "lower-case"},
			{"iqn.2026-11.io.ddpstore:Disk1", "lower-case"},
			{"iqn.26-11.io.ddpstore:disk1", "is not a date YYYY-MM"},
			{"iqn.2026-11", "the reversed domain name after the date is missing"},
			{"iqn.2026-11.io..ddpstore:disk1", "empty label"},
			{"'iqn.2026-11.io.ddpstore:'", "nothing follows the ':'"},
			{"iqn.2026-11.io.ddpstore:disk_1", "'_' is not allowed"},
			{"'iqn.2026-11.io.ddpstore:disk 1'", "' ' is not allowed"},
			{"eui.123", "16 hex digits"},
			{"eui.0200456xa425678d", "'x' is not a hex digit"},
			{"naa.123456789012345", "16 or 32 hex digits"},
			{"naa.52004567ba64678d0123", "16 or 32 hex digits"},
			{"disk1", "must start with iqn., eui. or naa."},
			{"iqn.2026-11.io.ddpstore:" + strings.Repeat("d", 200), "the limit is 223"},
			{"[iqn.2026-11.io.ddpstore:disk1]", "found a list"},
		}},
		{"alias", "targets[0].alias", []valueCase{
			{"[a]", "expected a target alias, found a list"},
			{"{a: b}", "found a mapping"},
			{"~", "no value"},
			{`"tab\there"`, "unprintable character U+0009"},
			{"''", "empty"},
			{strings.Repeat("a", 256), "256 octets long, the limit is 255"},
			{"!!binary aGVsbG8=", "the tag !!binary is not supported"},
			{"!custom x", "the tag !custom is not supported"},
		}},
		{"id0", "targets[0].luns[0].id", []valueCase{
			{"16384", "LUN id 16384 is out of range (0..16383)"},
			{"-1", "LUN id -1 is out of range (0..16383)"},
			{"'0'", "(remove the quotes)"},
			{"1.5", "the number 1.5 is not an integer"},
			{"[0]", "expected an integer, found a list"},
			{"99999999999999999999", "is out of range (0..16383)"},
			{"x", `the string "x" is not an integer`},
			{"~", "no value: expected an integer"},
		}},
		{"path0", "targets[0].luns[0].path", []valueCase{
			{"relative/disk1.img", "is relative: write an absolute path"},
			{"./disk1.img", "is relative"},
			{"disk1.img", "is relative"},
			{"''", "empty: expected an absolute path"},
			{"~", "no value"},
			{"[/a]", "found a list"},
			{`"/a\x01b"`, "unprintable character U+0001"},
			{`"/a\nb"`, "unprintable character U+000A"},
		}},
		{"size0", "targets[0].luns[0].size", []valueCase{
			{"12QB", `"12QB" is not a size (use a number with KiB, MiB, GiB or TiB)`},
			{"1.1KiB", "a fraction must come to a whole number of 512-octet blocks"},
			{"1000", "1000B is not a whole number of 512-octet blocks (use 512B or 1KiB)"},
			{"-1GiB", "sizes cannot be negative"},
			{"1GB", "the unit is GiB"},
			{"1gb", "the unit is GiB"},
			{"0", "0 octets"},
			{"0GiB", "0 octets"},
			{"1.5", "the number 1.5 is not a size"},
			{"1e9", "is not a size"},
			{"GiB", "is not a size"},
			{"'1 GiB x'", "is not a size"},
			{"513B", "513B is not a whole number of 512-octet blocks (use 512B or 1KiB)"},
			{"-512", "sizes cannot be negative"},
			{"0.1B", "a fraction must come"},
			{"99999999999TiB", "too large"},
			{"2PiB", "the largest unit is TiB"},
			{"[1GiB]", "expected a size, found a list"},
			{"true", "the boolean true is not a size"},
			{"1..5GiB", "is not a size"},
			{"~", "no value: expected a size"},
		}},
		{"memory1", "targets[0].luns[1].memory", []valueCase{
			{"256MB", "the unit is MiB"},
			{"0", "0 octets"},
			{"100", "100B is not a whole number of 512-octet blocks (use 512B)"},
			{"-1", "sizes cannot be negative"},
			{"1.3MiB", "a fraction must come"},
			{"abc", "is not a size"},
			{"{}", "found a mapping"},
			{"~", "no value"},
		}},
		{"readonly2", "targets[0].luns[2].readonly", []valueCase{
			{"yes", "is not a boolean"},
			{"1", "is not a boolean"},
			{"'true'", "(remove the quotes)"},
			{"[true]", "found a list"},
		}},
		{"init0", "targets[0].initiators[0]", []valueCase{
			{"IQN.2026-11.io.ddpstore:host1", "lower-case"},
			{"iqn.2026-11.io.ddpstore:host_1", "'_' is not allowed"},
			{"eui.123", "16 hex digits"},
			{"host1", "must start with iqn., eui. or naa."},
			{"iqn.2026-11", "the reversed domain name"},
			{"[a]", "expected an iSCSI name, found a list"},
			{"~", "no value"},
		}},
		{"init1", "targets[0].initiators[1]", []valueCase{
			{"iqn.2026-11.io.ddpstore:host1", `duplicate initiator "iqn.2026-11.io.ddpstore:host1" (first at line 24)`},
		}},
		{"maxsessions", "limits.max_sessions", []valueCase{
			{"0", "max_sessions 0 is out of range (1..65535)"},
			{"65536", "max_sessions 65536 is out of range (1..65535)"},
			{"-5", "out of range"},
			{"'64'", "(remove the quotes)"},
			{"1.5", "is not an integer"},
			{"many", "is not an integer"},
		}},
		{"queuedepth", "limits.queue_depth", []valueCase{
			{"0", "queue_depth 0 is out of range (1..4096)"},
			{"4097", "queue_depth 4097 is out of range (1..4096)"},
			{"x", "is not an integer"},
			{"[]", "found a list"},
		}},
		{"level", "log.level", []valueCase{
			{"INFO", `(did you mean "info"?)`},
			{"warning", `(did you mean "warn"?)`},
			{"verbose", `"verbose" is not a log level; use panic, fatal, error, warn, info, debug or trace`},
			{"3", `"3" is not a log level`},
			{"~", "no value"},
		}},
		{"format", "log.format", []valueCase{
			{"yaml", `"yaml" is not a log format; use text or json`},
			{"JSON", `(did you mean "json"?)`},
			{"[text]", "found a list"},
		}},
		{"name1", "targets[1].name", []valueCase{
			{"iqn.2026-11.io.ddpstore:disk1", `duplicate target name "iqn.2026-11.io.ddpstore:disk1" (first at line 12)`},
		}},
		{"id1", "targets[0].luns[1].id", []valueCase{
			{"0", "duplicate LUN id 0 (first at line 15)"},
		}},
		{"id2", "targets[0].luns[2].id", []valueCase{
			{"1", "duplicate LUN id 1 (first at line 18)"},
		}},
		{"path2", "targets[0].luns[2].path", []valueCase{
			{"/var/lib/ddpstore/disk1.img", "is already the backing store of targets[0].luns[0] (line 16)"},
			{"/var/lib/ddpstore//disk1.img", "is already the backing store"},
		}},
	}
	for _, v := range append(values, chapValues(36)...) {
		for i, c := range v.cases {
			addDoc(fmt.Sprintf("value-%s-%d", v.tag, i), baseDoc().set(v.tag, c.value), v.tag, v.path+": "+c.want)
		}
	}

	// Unknown fields, one in each mapping.
	unknown := []struct{ after, field, path, want string }{
		{"listen0", "sctp: true", "portals[0]", `unknown field "sctp"; the fields of a portal are listen, transport and mpa`},
		{"transport1", "mpa_revision: 2", "portals[1]", `unknown field "mpa_revision"`},
		{"revision", "marker: true", "portals[0].mpa", `unknown field "marker" (did you mean "markers"?); the fields of mpa are revision, markers and crc`},
		{"name0", "aliass: x", "targets[0]", `unknown field "aliass" (did you mean "alias"?); the fields of a target are name, alias, luns, initiators, chap, alua and immediate_data`},
		{"id0", "readOnly: true", "targets[0].luns[0]", `unknown field "readOnly" (did you mean "readonly"?); the fields of a LUN are id, path, memory, rbd, size and readonly`},
		{"memory1", "sizee: 1GiB", "targets[0].luns[1]", `unknown field "sizee" (did you mean "size"?)`},
		{"path2", "read_only: true", "targets[0].luns[2]", `unknown field "read_only" (did you mean "readonly"?)`},
		{"user", "password: x", "targets[0].chap", `unknown field "password"; the fields of chap are user, secret, mutual_user and mutual_secret`},
		{"muser", "mutualUser: x", "targets[0].chap", `(did you mean "mutual_user"?)`},
		{"duser", "mutual: true", "discovery_chap", `unknown field "mutual"`},
		{"maxsessions", "max-connections: 1", "limits", `unknown field "max-connections"; the fields of limits are max_sessions, queue_depth, max_logging_in, max_logging_in_per_address and login_timeout`},
		{"queuedepth", "queueDepth: 1", "limits", `(did you mean "queue_depth"?)`},
		{"level", "color: true", "log", `unknown field "color"; the fields of log are level and format`},
		{"format", "file: /var/log/x", "log", `unknown field "file"`},
		{"log", "version: 1", "", `unknown field "version"; the fields of a target configuration are portals, targets, discovery_chap, limits, log, metrics, control and state`},
		{"name1", "lun: []", "targets[1]", `unknown field "lun" (did you mean "luns"?)`},
	}
	for i, u := range unknown {
		d := baseDoc()
		if u.after == "log" { // a top-level field: after the whole log section
			d.insertAfter("format", "new", "x: 1").replace("new", u.field)
		} else {
			d.insertAfter(u.after, "new", u.field)
		}
		want := u.want
		if u.path != "" {
			want = u.path + ": " + want
		}
		addDoc(fmt.Sprintf("unknown-%d", i), d, "new", want)
	}

	// Duplicate fields: every scalar field written twice.
	dups := []struct{ tag, path, field string }{
		{"listen0", "portals[0]", "listen"}, {"transport0", "portals[0]", "transport"},
		{"revision", "portals[0].mpa", "revision"}, {"markers", "portals[0].mpa", "markers"},
		{"crc", "portals[0].mpa", "crc"}, {"listen1", "portals[1]", "listen"},
		{"transport1", "portals[1]", "transport"}, {"name0", "targets[0]", "name"},
		{"alias", "targets[0]", "alias"}, {"id0", "targets[0].luns[0]", "id"},
		{"path0", "targets[0].luns[0]", "path"}, {"size0", "targets[0].luns[0]", "size"},
		{"id1", "targets[0].luns[1]", "id"}, {"memory1", "targets[0].luns[1]", "memory"},
		{"path2", "targets[0].luns[2]", "path"}, {"readonly2", "targets[0].luns[2]", "readonly"},
		{"user", "targets[0].chap", "user"}, {"secret", "targets[0].chap", "secret"},
		{"muser", "targets[0].chap", "mutual_user"}, {"msecret", "targets[0].chap", "mutual_secret"},
		{"name1", "targets[1]", "name"}, {"duser", "discovery_chap", "user"},
		{"dsecret", "discovery_chap", "secret"}, {"maxsessions", "limits", "max_sessions"},
		{"queuedepth", "limits", "queue_depth"}, {"level", "log", "level"}, {"format", "log", "format"},
	}
	for _, c := range dups {
		d := baseDoc().dupAfter(c.tag)
		addDoc("dup-"+c.tag, d, "dup", fmt.Sprintf("%s: duplicate field %q (first at line %d)", c.path, c.field, baseDoc().line(c.tag)))
	}
	// Whole sections twice.
	addDoc("dup-section-limits", baseDoc().insertAfter("format", "new", "x: 1").replace("new", "limits: {}"), "new", fmt.Sprintf(`duplicate field "limits" (first at line %d)`, baseDoc().line("limits")))
	addDoc("dup-section-chap", baseDoc().insertAfter("msecret", "new", "x: 1").replace("new", "    chap: {}"), "new", `targets[0]: duplicate field "chap" (first at line 26)`)

	// Missing fields and impossible combinations.
	addDoc("missing-path-and-size", baseDoc().del("path0", "size0"), "id0", "targets[0].luns[0]: neither path, memory nor rbd")
	addDoc("missing-memory", baseDoc().del("memory1"), "id1", "targets[0].luns[1]: neither path, memory nor rbd")
	addDoc("path-and-memory", baseDoc().insertAfter("memory1", "new", "path: /srv/x"), "new", "targets[0].luns[1]: path, memory and rbd exclude each other")
	addDoc("memory-and-path", baseDoc().insertAfter("path0", "new", "memory: 1GiB"), "new", "targets[0].luns[0]: path, memory and rbd exclude each other")
	addDoc("memory-with-size", baseDoc().insertAfter("memory1", "new", "size: 1GiB"), "new", "targets[0].luns[1].size: size goes with path")
	addDoc("missing-secret", baseDoc().del("secret"), "chap", "targets[0].chap: user without secret: give both")
	addDoc("missing-user", baseDoc().del("user"), "chap", "targets[0].chap: secret without user: give both")
	addDoc("missing-one-way", baseDoc().del("user", "secret"), "chap", "targets[0].chap: mutual CHAP needs one-way CHAP too")
	addDoc("missing-mutual-secret", baseDoc().del("msecret"), "chap", "targets[0].chap: mutual_user without mutual_secret: give both")
	addDoc("missing-mutual-user", baseDoc().del("muser"), "chap", "targets[0].chap: mutual_secret without mutual_user: give both")
	addDoc("missing-discovery-secret", baseDoc().del("dsecret"), "dchap", "discovery_chap: user without secret")
	addDoc("missing-luns", baseDoc().del("luns1", "flowlun"), "name1", "targets[1].luns: missing: a target needs at least one LUN")
	addDoc("missing-targets", baseDoc().delRange("targets", "flowlun"), "portals", "targets: missing: a configuration exports at least one target")
	addDoc("missing-listen", baseDoc().replace("listen1", `  - transport: sctp`).del("transport1"), "listen1", "portals[1].listen: missing")
	addDoc("misspelt-name", baseDoc().replace("name0", "  - nam: iqn.2026-11.io.ddpstore:disk1"), "name0", `targets[0]: unknown field "nam" (did you mean "name"?)`)
	addDoc("misspelt-name-missing", baseDoc().replace("name0", "  - nam: iqn.2026-11.io.ddpstore:disk1"), "name0", "targets[0].name: missing: a target needs an iSCSI name")
	addDoc("misspelt-id", baseDoc().replace("id0", "      - ID: 0"), "id0", "targets[0].luns[0].id: missing: each LUN needs an id, 0..16383")

	// Wrong types and empty collections for whole sections.
	addDoc("empty-luns", baseDoc().delRange("id0", "readonly2").set("luns0", "[]"), "luns0", "targets[0].luns: empty: a target needs at least one LUN")
	addDoc("empty-targets", baseDoc().delRange("name0", "flowlun").set("targets", "[]"), "targets", "targets: empty: a configuration exports at least one target")
	addDoc("empty-portals", baseDoc().delRange("listen0", "transport1").set("portals", "[]"), "portals", "portals: empty: list at least one portal")
	addDoc("luns-scalar", baseDoc().del("flowlun").set("luns1", "5"), "luns1", "targets[1].luns: expected a list of LUNs, found the integer 5")
	addDoc("luns-null", baseDoc().del("flowlun"), "luns1", "targets[1].luns: expected a list of LUNs, found an empty value")
	addDoc("luns-mapping", baseDoc().replace("flowlun", "      id: 0"), "flowlun", "targets[1].luns: expected a list of LUNs, found a mapping")
	addDoc("mpa-scalar", baseDoc().del("revision", "markers", "crc").set("mpa", "tcp"), "mpa", `portals[0].mpa: expected a mapping (mpa: revision, markers, crc), found the string "tcp"`)
	addDoc("initiators-scalar", baseDoc().del("init0", "init1").set("initiators", "iqn.2026-11.io.ddpstore:host1"), "initiators", "targets[0].initiators: expected a list of iSCSI names")
	addDoc("chap-scalar", baseDoc().del("user", "secret", "muser", "msecret").set("chap", "alice"), "chap", "targets[0].chap: expected a mapping (chap: user, secret, mutual_user, mutual_secret)")
	addDoc("chap-empty", baseDoc().del("user", "secret", "muser", "msecret").set("chap", "{}"), "chap", "targets[0].chap: no credentials")
	addDoc("limits-list", baseDoc().del("maxsessions", "queuedepth").set("limits", "[64, 128]"), "limits", "limits: expected a mapping (limits: max_sessions, queue_depth, max_logging_in, max_logging_in_per_address, login_timeout), found a list")
	addDoc("log-scalar", baseDoc().del("level", "format").set("log", "debug"), "log", `log: expected a mapping (log: level, format), found the string "debug"`)
	addDoc("portals-mapping", baseDoc().delRange("listen0", "transport1").set("portals", "{listen: ':3260'}"), "portals", "portals: expected a list of portals, found a mapping")
	addDoc("portal-scalar", baseDoc().delRange("listen0", "crc").replace("listen1", `  - "127.0.0.1:3260"`).del("transport1"), "listen1", `portals[0]: expected a mapping (a portal: listen, transport, mpa), found the string "127.0.0.1:3260"`)
	addDoc("target-scalar", baseDoc().delRange("name1", "flowlun").insertAfter("msecret", "new", "x").replace("new", "  - iqn.2026-11.io.ddpstore:disk2"), "new", "targets[1]: expected a mapping (a target: name, alias, luns, initiators, chap, alua, immediate_data), found the string")

	// Flow-style LUNs.
	addDoc("flow-both", baseDoc().replace("flowlun", "      - {id: 0, memory: 1MiB, path: /srv/x}"), "flowlun", "targets[1].luns[0]: path, memory and rbd exclude each other")
	addDoc("flow-neither", baseDoc().replace("flowlun", "      - {id: 0}"), "flowlun", "targets[1].luns[0]: neither path, memory nor rbd")
	addDoc("flow-list", baseDoc().replace("flowlun", "      - [0, 1MiB]"), "flowlun", "targets[1].luns[0]: expected a mapping (a LUN: id, path, memory, rbd, size, readonly), found a list")
	addDoc("flow-dup-id", baseDoc().replace("flowlun", "      - {id: 0, memory: 1MiB, id: 1}"), "flowlun", `targets[1].luns[0]: duplicate field "id" (first at line 33, column 10)`)
	addDoc("rbd-and-memory", baseDoc().replace("flowlun", "      - {id: 0, memory: 1MiB, rbd: {image: d}}"), "flowlun", "targets[1].luns[0]: path, memory and rbd exclude each other")
	addDoc("rbd-no-image", baseDoc().replace("flowlun", "      - {id: 0, rbd: {pool: p}}"), "flowlun", "targets[1].luns[0].rbd.image: missing: the RBD image to export")
	addDoc("rbd-slash", baseDoc().replace("flowlun", "      - {id: 0, rbd: {image: p/d}}"), "flowlun", `targets[1].luns[0].rbd.image: "p/d": a Ceph image name has no '/' or '@'`)
	addDoc("rbd-client-prefix", baseDoc().replace("flowlun", "      - {id: 0, rbd: {image: d, user: client.admin}}"), "flowlun", `targets[1].luns[0].rbd.user: "client.admin": write the client name without "client." (admin)`)
	addDoc("rbd-relative-conf", baseDoc().replace("flowlun", "      - {id: 0, rbd: {image: d, conf: ceph.conf}}"), "flowlun", `targets[1].luns[0].rbd.conf: "ceph.conf" is relative`)
	addDoc("rbd-size", baseDoc().replace("flowlun", "      - {id: 0, rbd: {image: d}, size: 1GiB}"), "flowlun", "targets[1].luns[0].size: size goes with path: an RBD LUN's size is its image's")
	addDoc("rbd-unknown", baseDoc().replace("flowlun", "      - {id: 0, rbd: {image: d, namespace: x}}"), "flowlun", `targets[1].luns[0].rbd: unknown field "namespace"`)
	addDoc("rbd-twice", baseDoc().replace("flowlun", "    luns: [{id: 0, rbd: {image: d}}, {id: 1, rbd: {pool: rbd, image: d}}]").del("luns1"), "flowlun", "targets[1].luns[1].rbd: image rbd/d is already the backing store of targets[1].luns[0]")
	addDoc("flow-dup-lun", baseDoc().replace("flowlun", "    luns: [{id: 0, memory: 1MiB}, {id: 0, memory: 2MiB}]").del("luns1"), "flowlun", "targets[1].luns[1].id: duplicate LUN id 0 (first at line 32, column 17)")

	// Portals that clash.
	addDoc("portal-duplicate", baseDoc().set("listen1", "127.0.0.1:3260").set("transport1", "tcp"), "listen1", "portals[1].listen: duplicate portal: tcp 127.0.0.1:3260 is the same address as the portal at line 3")
	addDoc("portal-wildcard", baseDoc().set("listen1", "0.0.0.0:3260").set("transport1", "tcp"), "listen1", "portals[1].listen: tcp 0.0.0.0:3260 listens on every address on port 3260")
	addDoc("portal-mpa-sctp", baseDoc().insertAfter("transport1", "new", "mpa: {revision: 2}"), "new", "portals[1].mpa: only tcp portals use MPA")
	addDoc("portal-mpa-sctp-udp", baseDoc().set("transport0", "sctp-udp"), "mpa", "portals[0].mpa: only tcp portals use MPA")

	// YAML itself: syntax, anchors, tags, keys, documents.
	addDoc("syntax-colon", baseDoc().set("alias", "disk1: x"), "alias", "YAML syntax: mapping values are not allowed in this context")
	addDoc("syntax-tab", baseDoc().replace("level", "\tlevel: info"), "level", "(a tab indents this line: YAML indents with spaces only)")
	addDoc("syntax-indent", baseDoc().replace("alias", "     alias: disk1"), "alias", "YAML syntax: mapping values are not allowed in this context")
	addDoc("syntax-dedent", baseDoc().replace("alias", "   alias: disk1"), "alias", "YAML syntax: did not find expected '-' indicator")
	addDoc("syntax-quote", baseDoc().set("alias", `"disk1`), "alias", "YAML syntax: found unexpected end of stream")
	addDoc("syntax-flow", baseDoc().replace("flowlun", "      - {id: 0, memory: 1MiB"), "flowlun", "YAML syntax:")
	addDoc("syntax-anchor", baseDoc().set("alias", "*nope"), "alias", "YAML syntax: unknown anchor 'nope' referenced")
	addDoc("syntax-control", baseDoc().set("alias", "disk\x01"), "alias", "YAML syntax: control characters are not allowed")
	addDoc("merge-key", baseDoc().insertAfter("name0", "new", "<<: {alias: x}"), "new", "targets[0]: merge keys (<<) are not supported")
	addDoc("list-key", baseDoc().insertAfter("name0", "new", "[a]: b"), "new", "targets[0]: a key must be a field name, found a list")
	addDoc("second-document", baseDoc().insertAfter("format", "new", "x").replace("new", "---"), "new", "a second YAML document starts here")
	addDoc("document-list", &doc{lines: []string{"# a list", "- targets: []"}, tags: []string{"", "new"}}, "new", "expected a mapping (a target configuration")
	return cases
}

// TestMalformedCorpus checks that each generated malformed document is
// rejected and that its defects are reported at exactly the right line,
// with no cascade of defects elsewhere.
func TestMalformedCorpus(t *testing.T) {
	base, err := ParseTarget("base.yaml", []byte(corpusBase))
	if err != nil {
		t.Fatalf("the corpus base is not valid: %v", err)
	}
	if base.Targets[0].CHAP == nil || base.DiscoveryCHAP == nil || len(base.Portals) != 2 {
		t.Fatalf("the corpus base lost fields: %+v", base)
	}
	checkCorpus(t, "corpus", corpus(), func(file string, text []byte) error {
		_, err := ParseTarget(file, text)
		return err
	})
}

// checkCorpus parses each malformed document of a corpus (at least 200,
// uniquely named) as file <prefix>-NNN.yaml, and checks that it is refused,
// every defect at the case's line, its message starting with file:line:,
// and one of them saying what the case wants.
func checkCorpus(t *testing.T, prefix string, cases []corpusCase, parse func(file string, text []byte) error) {
	t.Helper()
	if len(cases) < 200 {
		t.Errorf("the corpus has %d documents, want at least 200", len(cases))
	}
	names := map[string]bool{}
	for i, c := range cases {
		if names[c.name] {
			t.Fatalf("two cases named %s", c.name)
		}
		names[c.name] = true
		file := fmt.Sprintf("%s-%03d.yaml", prefix, i)
		err := parse(file, []byte(c.text))
		if err == nil {
			t.Errorf("%s (%s): accepted:\n%s", file, c.name, numbered(c.text))
			continue
		}
		found := false
		for _, e := range defects(t, err) {
			if e.Line != c.line {
				t.Errorf("%s (%s): a defect at line %d, want every defect at line %d:\n%v\n%s", file, c.name, e.Line, c.line, err, numbered(c.text))
				break
			}
			prefix := fmt.Sprintf("%s:%d:", file, c.line)
			if !strings.HasPrefix(e.Error(), prefix) {
				t.Errorf("%s (%s): %q does not start with %q", file, c.name, e.Error(), prefix)
			}
			found = found || says(e, c.want)
		}
		if !found {
			t.Errorf("%s (%s): no defect says %q:\n%v", file, c.name, c.want, err)
		}
	}
	t.Logf("%d malformed %s documents rejected at the expected lines", len(cases), prefix)
}

// says reports whether e is about want: "path: words" means the defect is at
// that path and its message holds the words; otherwise the whole text must
// hold want.
func says(e *Error, want string) bool {
	if path, words, ok := strings.Cut(want, ": "); ok && !strings.ContainsAny(path, " \"") {
		return e.Path == path && strings.Contains(e.Msg, words)
	}
	text := e.Msg
	if e.Path != "" {
		text = e.Path + ": " + e.Msg
	}
	return strings.Contains(text, want)
}

func numbered(text string) string {
	var b strings.Builder
	for i, l := range strings.Split(text, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}
