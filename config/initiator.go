package config

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Initiator is the configuration of ddpinitiator: this host's iSCSI name, the
// targets it logs in to, and how its sessions and mounts behave. ParseInitiator
// fills in every default, so an Initiator is always the effective
// configuration; Override applies command-line flags on top of it.
type Initiator struct {
	InitiatorName   string         // this host's iSCSI name (CheckISCSIName)
	Targets         []RemoteTarget // at least one, names distinct
	DiscoveryCHAP   *CHAP          // CHAP for discovery sessions (SendTargets); nil: none
	QueueDepth      int            // commands in flight per session, 1..MaxQueueDepth; default 128
	Buffers         Size           // registered data buffer region per session, MinBuffers..MaxBuffers in whole pages; default 64MiB
	MPA             MPA            // MPA options of the connections to tcp targets
	Mount           Mount          // FUSE options of the mount and attach commands
	RecoveryTimeout time.Duration  // how long commands wait through a reconnect before they fail, 1s..1h; default 30s
	NOP             NOP            // keepalive
	Log             Log
	Metrics         Metrics // the Prometheus endpoint of mount and attach; off by default
}

// RemoteTarget is one target the initiator logs in to (YAML: name, portals,
// transport, luns, chap).
type RemoteTarget struct {
	Name      string   // the target's iSCSI name (CheckISCSIName)
	Portals   []string // host:port addresses to dial, in the order to try them; at least one, distinct
	Transport string   // TransportTCP (default), TransportSCTP, TransportSCTPUDP or TransportISCSITCP
	LUNs      []int    // the LUNs to use, distinct, 0..MaxLUNID; nil: every LUN the target reports
	CHAP      *CHAP    // nil: no authentication
	// HeaderDigest and DataDigest offer CRC32C digests (RFC 7143 13.1) on
	// an iscsi-tcp target (YAML: header_digest, data_digest: crc32c or
	// none, the default). iSER carries none: MPA's CRC covers its frames.
	HeaderDigest, DataDigest bool
	// RoundRobin (YAML: multipath: round-robin) keeps a session to every
	// portal at once and spreads the commands over the active/optimized
	// ones; the default (multipath: failover) uses one portal at a time
	// and moves to the next when it fails or is in ALUA standby.
	RoundRobin bool
}

// Mount holds the FUSE options of ddpinitiator mount and attach (YAML:
// direct_io, max_write, allow_other, io_uring).
type Mount struct {
	DirectIO   bool // bypass the page cache (FOPEN_DIRECT_IO); default true
	MaxWrite   Size // the largest write FUSE passes at once, 4KiB..MaxMaxWrite in whole pages; default 1MiB
	AllowOther bool // let users other than the one mounting use the mount (needs root or user_allow_other); default false
	// IOURing is how FUSE requests reach the mount: "off" (default) through
	// /dev/fuse; "auto" over FUSE's io_uring queues where the kernel offers
	// them (Linux 6.14+ with /sys/module/fuse/parameters/enable_uring Y),
	// else through /dev/fuse; "on" only over io_uring (the mount fails
	// without). Off by default: measured against /dev/fuse on a 2-CPU VM,
	// the io_uring queues were slower at every pattern (docs/performance.md).
	IOURing string
}

// NOP holds the keepalive settings (YAML: interval, timeout): a NOP-Out ping
// after Interval without hearing from the target, and the connection is
// declared dead (and recovery starts) when no answer comes within Timeout.
type NOP struct {
	Interval time.Duration // 0 turns keepalive off; else 1s..1h; default 5s
	Timeout  time.Duration // 1s..1h; default 15s; unused while Interval is 0
}

// Limits and defaults of the initiator configuration.
const (
	MaxQueueDepth          = 4096             // the largest queue depth
	DefaultQueueDepth      = 128              // the queue depth of a configuration that names none
	DefaultBuffers         = 64 * MiB         // the buffer region of a configuration that names none
	MinBuffers             = MiB              // the smallest buffer region: one command of the largest burst (MaxBurstLength 1MiB)
	MaxBuffers             = 4 * GiB          // the largest: MaxQueueDepth commands of 1MiB, more can never be in use
	MaxMaxWrite            = MiB              // the largest FUSE write (FUSE_MAX_MAX_PAGES, 256 pages)
	DefaultRecoveryTimeout = 30 * time.Second // the recovery timeout of a configuration that names none
	pageSize               = 4 * KiB          // buffers and FUSE writes come in whole pages
	minTimeout             = time.Second      // the shortest recovery timeout, NOP interval and NOP timeout
	maxTimeout             = time.Hour        // the longest
)

// DefaultMount returns the mount options a configuration gets when it names none.
func DefaultMount() Mount {
	return Mount{DirectIO: true, MaxWrite: MaxMaxWrite, AllowOther: false, IOURing: "off"}
}

// DefaultNOP returns the keepalive a configuration gets when it names none.
func DefaultNOP() NOP { return NOP{Interval: 5 * time.Second, Timeout: 15 * time.Second} }

// defaultInitiatorYAML is what ddpinitiator runs when no file is given.
//
//go:embed default-initiator.yaml
var defaultInitiatorYAML []byte

// DefaultInitiator returns the embedded default configuration: this host as
// iqn.2026-11.io.ddpstore:initiator, logging in to the target of
// DefaultTarget (iqn.2026-11.io.ddpstore:default on 127.0.0.1:3260) and using
// every LUN it reports. Each call returns a new Initiator the caller may
// change.
func DefaultInitiator() *Initiator {
	c, err := ParseInitiator("default-initiator.yaml (embedded)", defaultInitiatorYAML)
	if err != nil {
		panic("config: the embedded default initiator configuration is invalid: " + err.Error())
	}
	return c
}

// LoadInitiator reads and parses the initiator configuration in the file at
// path.
func LoadInitiator(path string) (*Initiator, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParseInitiator(path, data)
}

// ParseInitiator parses an initiator configuration, checks it and fills in
// its defaults. filename is used only in messages. On error it returns every
// defect found, each an *Error naming file:line and the field, joined with
// errors.Join in the order of the file.
func ParseInitiator(filename string, data []byte) (*Initiator, error) {
	d := newDecoder(filename)
	d.needs = "initiator_name and a targets list"
	root := d.document(data)
	if root == nil {
		return nil, d.err()
	}
	c := d.initiator(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// FindTarget returns the target of c named name or, when name is empty, the
// only target of c. The error lists the names to choose from.
func (c *Initiator) FindTarget(name string) (*RemoteTarget, error) {
	names := make([]string, len(c.Targets))
	for i := range c.Targets {
		if name != "" && c.Targets[i].Name == name {
			return &c.Targets[i], nil
		}
		names[i] = c.Targets[i].Name
	}
	switch {
	case len(names) == 0:
		return nil, errors.New("the configuration has no targets")
	case name == "" && len(names) == 1:
		return &c.Targets[0], nil
	case name == "":
		return nil, fmt.Errorf("the configuration has %d targets, name one: %s", len(names), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("no target %q in the configuration; it has %s", clip(name), strings.Join(names, ", "))
}

var (
	initiatorFields    = []string{"initiator_name", "targets", "discovery_chap", "queue_depth", "buffers", "mpa", "mount", "recovery_timeout", "nop", "log", "metrics"}
	remoteTargetFields = []string{"name", "portals", "transport", "luns", "chap", "header_digest", "data_digest", "multipath"}
	multipathModes     = []string{"failover", "round-robin"}
	digestValues       = []string{"crc32c", "none"}
	mountFields        = []string{"direct_io", "max_write", "allow_other", "io_uring"}
	ioURingValues      = []string{"auto", "on", "off"}
	nopFields          = []string{"interval", "timeout"}
)

// initiatorSections are the mappings of the initiator configuration whose
// fields are all settings (and flags): the YAML name and the fields.
var initiatorSections = []struct {
	name   string
	fields []string
}{{"mpa", mpaFields}, {"mount", mountFields}, {"nop", nopFields}, {"log", logFields}, {"metrics", metricsFields}}

// initiator reads the document root as an initiator configuration, with
// every default filled in; its defects go to d.
func (d *decoder) initiator(root *yaml.Node) *Initiator {
	c := &Initiator{
		QueueDepth: DefaultQueueDepth, Buffers: DefaultBuffers, MPA: DefaultMPA(), Mount: DefaultMount(),
		RecoveryTimeout: DefaultRecoveryTimeout, NOP: DefaultNOP(), Log: DefaultLog(),
	}
	f, ok := d.mapping(root, "", "an initiator configuration", initiatorFields)
	if !ok {
		return c
	}
	var secrets []secretUse
	if nf, has := f["initiator_name"]; has {
		settingFor("initiator_name").read(d, c, nf, "initiator_name")
	} else {
		d.missing(root, "", "initiator_name", "this host needs an iSCSI name of its own, as iqn.2026-11.io.example:host1 (targets admit initiators by name, and two hosts with one name take over each other's sessions)")
	}
	if tf, has := f["targets"]; has {
		items, ok := d.sequence(tf, "targets", "targets")
		if ok && len(items) == 0 {
			d.errorf(d.resolve(tf.val), "targets", "empty: an initiator logs in to at least one target")
		}
		names := map[string]string{}
		for i, item := range items {
			c.Targets = append(c.Targets, d.remoteTarget(item, index("targets", i), names, &secrets))
		}
	} else {
		d.missing(root, "", "targets", "an initiator logs in to at least one target (name and portals)")
	}
	if cf, has := f["discovery_chap"]; has {
		c.DiscoveryCHAP = d.chap(cf, "discovery_chap", &secrets)
	}
	for _, name := range []string{"queue_depth", "buffers", "recovery_timeout"} {
		if sf, has := f[name]; has {
			settingFor(name).read(d, c, sf, name)
		}
	}
	for _, sec := range initiatorSections {
		sf, has := f[sec.name]
		if !has {
			continue
		}
		if msg := sectionGuard(c, sec.name); msg != "" {
			d.errorf(sf.key, sec.name, "%s; remove %s", msg, sec.name)
			continue
		}
		mf, ok := d.mapping(sf.val, sec.name, sec.name, sec.fields)
		if !ok {
			continue
		}
		for _, name := range sec.fields {
			ff, has := mf[name]
			if !has {
				continue
			}
			path := join(sec.name, name)
			s := settingFor(path)
			if s.guard != nil {
				if msg := s.guard(c, false); msg != "" {
					d.errorf(ff.key, path, "%s", msg)
					continue
				}
			}
			s.read(d, c, ff, path)
		}
	}
	d.checkSecrets(secrets)
	return c
}

// sectionGuard says why the section cannot be given in c, or "".
func sectionGuard(c *Initiator, section string) string {
	if section == "mpa" && !c.usesTCP() {
		return "only tcp targets use MPA, and every target here uses sctp or sctp-udp, which carry DDP without it (RFC 5043)"
	}
	return ""
}

// usesTCP reports whether a target of c may use TCP (and so MPA): one does,
// or a target's transport is unknown (a defect reported elsewhere), or there
// are no targets yet.
func (c *Initiator) usesTCP() bool {
	return len(c.Targets) == 0 || slices.ContainsFunc(c.Targets, func(t RemoteTarget) bool {
		return t.Transport == TransportTCP || t.Transport == ""
	})
}

// remoteTarget reads one target. names maps the target names seen so far to
// where they are.
func (d *decoder) remoteTarget(item *yaml.Node, path string, names map[string]string, secrets *[]secretUse) RemoteTarget {
	t := RemoteTarget{Transport: TransportTCP}
	f, ok := d.mapping(item, path, "a target", remoteTargetFields)
	if !ok {
		return t
	}
	if nf, has := f["name"]; has {
		if s, n, ok := d.iscsiName(nf, join(path, "name")); ok {
			if first, dup := names[s]; dup {
				d.errorf(n, join(path, "name"), "duplicate target %q (first at %s)", s, first)
			} else {
				names[s] = d.pos(n)
				t.Name = s
			}
		}
	} else {
		d.missing(item, path, "name", "a target needs its iSCSI name, as iqn.2026-11.io.example:disk1")
	}
	if pf, has := f["portals"]; has {
		t.Portals = d.dialPortals(pf, join(path, "portals"))
	} else {
		d.missing(item, path, "portals", "a target needs at least one address to dial, as portals: [127.0.0.1:3260]")
	}
	if tf, has := f["transport"]; has {
		t.Transport, _ = d.oneOf(tf, join(path, "transport"), "a transport", transports)
	}
	if lf, has := f["luns"]; has {
		t.LUNs = d.lunSelection(lf, join(path, "luns"))
	}
	if cf, has := f["chap"]; has {
		t.CHAP = d.chap(cf, join(path, "chap"), secrets)
	}
	for _, k := range []struct {
		key string
		on  *bool
	}{{"header_digest", &t.HeaderDigest}, {"data_digest", &t.DataDigest}} {
		kf, has := f[k.key]
		if !has {
			continue
		}
		v, ok := d.oneOf(kf, join(path, k.key), "a digest", digestValues)
		if !ok {
			continue
		}
		*k.on = v == "crc32c"
		if *k.on && t.Transport != TransportISCSITCP {
			d.errorf(d.resolve(kf.val), join(path, k.key), "only iscsi-tcp targets use iSCSI digests: over %s, MPA's CRC covers every frame (set mpa.crc)", t.Transport)
		}
	}
	if mf, has := f["multipath"]; has {
		if v, ok := d.oneOf(mf, join(path, "multipath"), "a multipath mode", multipathModes); ok {
			t.RoundRobin = v == "round-robin"
			if t.RoundRobin && len(t.Portals) < 2 {
				d.errorf(d.resolve(mf.val), join(path, "multipath"), "round-robin needs at least two portals (the target's gateways)")
			}
		}
	}
	return t
}

// dialPortals reads the addresses of a target: host:port with a host that is
// not the every-address wildcard, each once.
func (d *decoder) dialPortals(f field, path string) []string {
	items, ok := d.sequence(f, path, "host:port addresses")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(d.resolve(f.val), path, "empty: a target needs at least one address to dial, as [127.0.0.1:3260]")
		return nil
	}
	seen := map[hostPort]string{}
	var out []string
	for i, item := range items {
		ip := index(path, i)
		s, ok := d.str(field{val: item}, ip, "host:port")
		if !ok {
			continue
		}
		n := d.resolve(item)
		hp, err := parseHostPort(s, false)
		switch first, dup := seen[hp]; {
		case err != nil:
			d.errorf(n, ip, "%v", err)
		case hp.wildcard:
			d.errorf(n, ip, "%q is the every-address wildcard, which only a listener binds to: dial an address of the target, as 127.0.0.1:%d", clip(s), hp.port)
		case dup:
			d.errorf(n, ip, "duplicate portal %s (first at %s)", clip(s), first)
		default:
			seen[hp] = d.pos(n)
			out = append(out, s)
		}
	}
	return out
}

// lunSelection reads the LUNs to use: distinct LUN numbers. An empty list
// is nil: every LUN.
func (d *decoder) lunSelection(f field, path string) []int {
	items, ok := d.sequence(f, path, "LUN numbers")
	if !ok {
		return nil
	}
	seen := map[int]string{}
	var out []int
	for i, item := range items {
		ip := index(path, i)
		if n := d.resolve(item); n.Kind == yaml.MappingNode {
			d.errorf(n, ip, "expected a LUN number, found a mapping (luns lists the numbers of the LUNs to use, as luns: [0, 1]; the target's configuration defines them)")
			continue
		}
		v, ok := d.integer(field{val: item}, ip, "LUN", 0, MaxLUNID)
		if !ok {
			continue
		}
		n := d.resolve(item)
		if first, dup := seen[int(v)]; dup {
			d.errorf(n, ip, "duplicate LUN %d (first at %s)", v, first)
			continue
		}
		seen[int(v)] = d.pos(n)
		out = append(out, int(v))
	}
	return out
}

// Setting is a value of the initiator configuration that a command-line flag
// can override (Initiator.Override): the flat settings, not the targets.
type Setting struct {
	Flag  string // the flag, without dashes: queue-depth
	Field string // the YAML field it overrides: queue_depth, nop.interval
	Bool  bool   // true or false: the flag alone (--mount-allow-other) means true
	Usage string // one line for --help
}

// setting is a Setting and how to read and check it, for files and flags alike.
type setting struct {
	Setting
	// read checks f and, when it is valid, stores it in c; defects go to d.
	read func(d *decoder, c *Initiator, f field, path string)
	// guard, when not nil, says why the setting cannot be given in c, or "";
	// forFlag words the advice for a flag rather than a file.
	guard func(c *Initiator, forFlag bool) string
}

// readBool is the read function of a boolean setting stored where at says.
func readBool(at func(c *Initiator) *bool) func(d *decoder, c *Initiator, f field, path string) {
	return func(d *decoder, c *Initiator, f field, path string) {
		if v, ok := d.boolean(f, path); ok {
			*at(c) = v
		}
	}
}

// initiatorSettings are the flat settings, in the order of the file.
var initiatorSettings = []setting{
	{Setting{"initiator-name", "initiator_name", false, "this host's iSCSI name, as iqn.2026-11.io.example:host1"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, _, ok := d.iscsiName(f, path); ok {
				c.InitiatorName = v
			}
		}, nil},
	{Setting{"queue-depth", "queue_depth", false, fmt.Sprintf("commands in flight per session, 1..%d (default %d)", MaxQueueDepth, DefaultQueueDepth)},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.integer(f, path, "queue depth", 1, MaxQueueDepth); ok {
				c.QueueDepth = int(v)
			}
		}, nil},
	{Setting{"buffers", "buffers", false, fmt.Sprintf("registered data buffer region per session, %s..%s (default %s)", Size(MinBuffers), Size(MaxBuffers), Size(DefaultBuffers))},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.sizeIn(f, path, "buffers", MinBuffers, MaxBuffers, pageSize,
				": at least one command of the largest burst, and 4096 of them at most"); ok {
				c.Buffers = v
			}
		}, nil},
	{Setting{"mpa-revision", "mpa.revision", false, "MPA revision of tcp connections: 1 (RFC 5044) or 2 (RFC 6581, default)"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.mpaRevision(f, path); ok {
				c.MPA.Revision = v
			}
		}, mpaGuard},
	{Setting{"mpa-markers", "mpa.markers", true, "ask for MPA Markers on tcp connections (default false)"},
		readBool(func(c *Initiator) *bool { return &c.MPA.Markers }), mpaGuard},
	{Setting{"mpa-crc", "mpa.crc", true, "ask for MPA CRCs on tcp connections (default true)"},
		readBool(func(c *Initiator) *bool { return &c.MPA.CRC }), mpaGuard},
	{Setting{"mount-direct-io", "mount.direct_io", true, "mount: bypass the page cache (default true)"},
		readBool(func(c *Initiator) *bool { return &c.Mount.DirectIO }), nil},
	{Setting{"mount-max-write", "mount.max_write", false, fmt.Sprintf("mount: the largest write FUSE passes at once, %s..%s in %s pages (default %s)", Size(pageSize), Size(MaxMaxWrite), Size(pageSize), Size(MaxMaxWrite))},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.sizeIn(f, path, "max write", pageSize, MaxMaxWrite, pageSize,
				": FUSE passes at most 256 pages at once"); ok {
				c.Mount.MaxWrite = v
			}
		}, nil},
	{Setting{"mount-allow-other", "mount.allow_other", true, "mount: let other users use the mount (default false)"},
		readBool(func(c *Initiator) *bool { return &c.Mount.AllowOther }), nil},
	{Setting{"mount-io-uring", "mount.io_uring", false, "mount: FUSE requests over io_uring: off (through /dev/fuse, default), auto (where the kernel offers it) or on"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.oneOf(f, path, "an io_uring mode", ioURingValues); ok {
				c.Mount.IOURing = v
			}
		}, nil},
	{Setting{"recovery-timeout", "recovery_timeout", false, fmt.Sprintf("how long commands wait through a reconnect before they fail, %s..%s (default %s)", formatDuration(minTimeout), formatDuration(maxTimeout), formatDuration(DefaultRecoveryTimeout))},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.duration(f, path, "recovery timeout", minTimeout, maxTimeout, ""); ok {
				c.RecoveryTimeout = v
			}
		}, nil},
	{Setting{"nop-interval", "nop.interval", false, fmt.Sprintf("keepalive: a NOP-Out after this long without news of the target, 0 (off) or %s..%s (default %s)", formatDuration(minTimeout), formatDuration(maxTimeout), formatDuration(DefaultNOP().Interval))},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.duration(f, path, "NOP interval", minTimeout, maxTimeout, "turns keepalive off"); ok {
				c.NOP.Interval = v
				if v == 0 { // the timeout is unused, and a file cannot give it: as ParseInitiator would have it
					c.NOP.Timeout = DefaultNOP().Timeout
				}
			}
		}, nil},
	{Setting{"nop-timeout", "nop.timeout", false, fmt.Sprintf("keepalive: how long to wait for the NOP-In before reconnecting, %s..%s (default %s)", formatDuration(minTimeout), formatDuration(maxTimeout), formatDuration(DefaultNOP().Timeout))},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.duration(f, path, "NOP timeout", minTimeout, maxTimeout, ""); ok {
				c.NOP.Timeout = v
			}
		},
		func(c *Initiator, forFlag bool) string {
			if c.NOP.Interval != 0 {
				return ""
			}
			if forFlag {
				return "has no effect while the NOP interval is 0 (keepalive off): give --nop-interval too"
			}
			return "has no effect while nop.interval is 0 (keepalive off): remove timeout, or give an interval"
		}},
	{Setting{"log-level", "log.level", false, "log level: " + list(logLevels, "or") + " (default info)"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.logLevel(f, path); ok {
				c.Log.Level = v
			}
		}, nil},
	{Setting{"log-format", "log.format", false, "log format: text (default) or json"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v, ok := d.logFormat(f, path); ok {
				c.Log.Format = v
			}
		}, nil},
	{Setting{"metrics-listen", "metrics.listen", false, "mount and attach: serve Prometheus metrics on host:port, /metrics (default: none)"},
		func(d *decoder, c *Initiator, f field, path string) {
			if v := d.metricsListen(f, path, nil); v != "" {
				c.Metrics.Listen = v
			}
		}, nil},
}

// mpaGuard refuses the MPA settings when no target uses tcp.
func mpaGuard(c *Initiator, _ bool) string { return sectionGuard(c, "mpa") }

// settingFor returns the setting of a YAML field; it must exist.
func settingFor(field string) *setting {
	for i := range initiatorSettings {
		if initiatorSettings[i].Field == field {
			return &initiatorSettings[i]
		}
	}
	panic("config: no setting " + field)
}

// InitiatorSettings returns the settings of the initiator configuration that
// flags can override, in the order of the file.
func InitiatorSettings() []Setting {
	out := make([]Setting, len(initiatorSettings))
	for i, s := range initiatorSettings {
		out[i] = s.Setting
	}
	return out
}

// Override sets the setting whose flag is name (as in InitiatorSettings:
// "queue-depth", "nop-interval"; leading dashes are ignored) to value, written
// as it would be in the YAML file, and checks it as ParseInitiator does, with
// the same messages and the same cross-checks (no MPA setting without a tcp
// target, no NOP timeout while keepalive is off). The error names the flag
// (--queue-depth: queue depth 0 is out of range (1..4096)), and c is then
// unchanged. Setting the NOP interval to 0 resets the unused NOP timeout to
// its default, as a file with keepalive off has it.
//
// Flags override the file: load the file, then apply the flags given on the
// command line; InitiatorFlags does the bookkeeping.
func (c *Initiator) Override(name, value string) error {
	flagName := strings.TrimLeft(name, "-")
	var s *setting
	for i := range initiatorSettings {
		if initiatorSettings[i].Flag == flagName {
			s = &initiatorSettings[i]
		}
	}
	if s == nil {
		names := initiatorFlagNames()
		msg := fmt.Sprintf("--%s is not a setting a flag overrides", clip(flagName))
		if sug := suggest(flagName, names); sug != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", sug)
		}
		for i := range names {
			names[i] = "--" + names[i]
		}
		return fmt.Errorf("%s; the settings are %s", msg, list(names, "and"))
	}
	if s.guard != nil {
		if msg := s.guard(c, true); msg != "" {
			return fmt.Errorf("--%s: %s", s.Flag, msg)
		}
	}
	if msg := s.check(c, value); msg != "" {
		return fmt.Errorf("--%s: %s", s.Flag, msg)
	}
	return nil
}

// initiatorFlagNames returns the flags of the settings, without dashes.
func initiatorFlagNames() []string {
	out := make([]string, len(initiatorSettings))
	for i, s := range initiatorSettings {
		out[i] = s.Flag
	}
	return out
}

// check reads value into c as the file's value of s would be read, and
// returns what is wrong with it, or "".
func (s *setting) check(c *Initiator, value string) string {
	d := newDecoder("--" + s.Flag)
	s.read(d, c, field{val: flagNode(value)}, s.Field)
	var msgs []string
	for _, e := range d.list {
		msgs = append(msgs, e.Msg)
	}
	return strings.Join(msgs, "; ")
}

// flagNode makes a YAML scalar of a flag's value, with the tag the value
// would have written plain in a file: --queue-depth 32 is an integer, and
// --initiator-name 2026 too (and so not an iSCSI name). An empty value is
// no value.
func flagNode(value string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	if value == "" {
		n.Tag = "!!null"
		return n
	}
	if docs, err := parseAll([]byte(value)); err == nil && len(docs) == 1 && len(docs[0].Content) == 1 {
		if v := docs[0].Content[0]; v.Kind == yaml.ScalarNode && v.Style == 0 && v.Value == value {
			n.Tag = v.ShortTag()
		}
	}
	return n
}

// InitiatorFlags defines on fs one flag per setting of InitiatorSettings
// (--queue-depth, --nop-interval, --log-level, ...; the boolean ones may be
// given alone) and returns the function that applies the ones given on the
// command line to a configuration. Call it after fs.Parse and after loading
// the file, so that flags win over the file:
//
//	apply := config.InitiatorFlags(fs)
//	fs.Parse(args)                        // a malformed value fails here, naming the flag
//	cfg, err := config.LoadInitiator(path)
//	err = apply(cfg)                      // every flag given, through Override
//
// apply reports every flag that does not fit the configuration, joined. It
// panics, as flag does, if fs already has a flag of the same name.
func InitiatorFlags(fs *flag.FlagSet) (apply func(c *Initiator) error) {
	values := map[string]*overrideValue{}
	for i := range initiatorSettings {
		s := &initiatorSettings[i]
		v := &overrideValue{s: s}
		values[s.Flag] = v
		fs.Var(v, s.Flag, s.Usage)
	}
	return func(c *Initiator) error {
		var errs []error
		fs.Visit(func(f *flag.Flag) { // set flags only, in lexical order: nop-interval before nop-timeout
			if v, ok := values[f.Name]; ok && f.Value == flag.Value(v) {
				if err := c.Override(f.Name, v.value); err != nil {
					errs = append(errs, err)
				}
			}
		})
		return errors.Join(errs...)
	}
}

// overrideValue is the flag.Value of a setting: the text given, checked on
// its own when it is set (the configuration it is applied to comes later).
type overrideValue struct {
	s     *setting
	value string
}

func (v *overrideValue) String() string {
	if v == nil {
		return ""
	}
	return v.value
}

func (v *overrideValue) Set(text string) error {
	scratch := DefaultInitiator()
	if msg := v.s.check(scratch, text); msg != "" {
		return errors.New(msg)
	}
	v.value = text
	return nil
}

// IsBoolFlag lets a boolean setting be given alone: --mount-allow-other.
func (v *overrideValue) IsBoolFlag() bool { return v != nil && v.s != nil && v.s.Bool }

// Marshal writes c as YAML with every field spelled out, defaults included
// (the LUNs of a target that uses them all and the MPA options of a
// configuration without tcp targets aside): the effective configuration. For
// an Initiator that ParseInitiator returned, with or without Override,
// ParseInitiator(Marshal()) yields an equal Initiator. Marshal does not check
// c: an Initiator built by hand with invalid values produces YAML that
// ParseInitiator rejects. The output holds the CHAP secrets.
func (c *Initiator) Marshal() ([]byte, error) {
	root := mapNode(false)
	add(root, "initiator_name", strNode(c.InitiatorName))
	targets := seqNode()
	for _, t := range c.Targets {
		tm := mapNode(false)
		add(tm, "name", strNode(t.Name))
		portals := seqNode() // block style: in a flow list each address would be quoted
		for _, p := range t.Portals {
			portals.Content = append(portals.Content, strNode(p))
		}
		add(tm, "portals", portals)
		add(tm, "transport", strNode(t.Transport))
		if len(t.LUNs) > 0 {
			luns := seqNode()
			luns.Style = yaml.FlowStyle
			for _, l := range t.LUNs {
				luns.Content = append(luns.Content, intNode(l))
			}
			add(tm, "luns", luns)
		}
		if t.CHAP != nil {
			add(tm, "chap", chapNode(t.CHAP))
		}
		if t.HeaderDigest {
			add(tm, "header_digest", strNode("crc32c"))
		}
		if t.DataDigest {
			add(tm, "data_digest", strNode("crc32c"))
		}
		if t.RoundRobin {
			add(tm, "multipath", strNode("round-robin"))
		}
		targets.Content = append(targets.Content, tm)
	}
	add(root, "targets", targets)
	if c.DiscoveryCHAP != nil {
		add(root, "discovery_chap", chapNode(c.DiscoveryCHAP))
	}
	add(root, "queue_depth", intNode(c.QueueDepth))
	add(root, "buffers", strNode(c.Buffers.String()))
	if c.usesTCP() {
		mm := mapNode(true)
		add(mm, "revision", intNode(c.MPA.Revision))
		add(mm, "markers", boolNode(c.MPA.Markers))
		add(mm, "crc", boolNode(c.MPA.CRC))
		add(root, "mpa", mm)
	}
	mount := mapNode(true)
	add(mount, "direct_io", boolNode(c.Mount.DirectIO))
	add(mount, "max_write", strNode(c.Mount.MaxWrite.String()))
	add(mount, "allow_other", boolNode(c.Mount.AllowOther))
	add(mount, "io_uring", strNode(c.Mount.IOURing))
	add(root, "mount", mount)
	add(root, "recovery_timeout", strNode(formatDuration(c.RecoveryTimeout)))
	nop := mapNode(true)
	add(nop, "interval", strNode(formatDuration(c.NOP.Interval)))
	if c.NOP.Interval != 0 {
		add(nop, "timeout", strNode(formatDuration(c.NOP.Timeout)))
	}
	add(root, "nop", nop)
	add(root, "log", logNode(c.Log))
	if c.Metrics.Listen != "" {
		add(root, "metrics", metricsNode(c.Metrics))
	}

	return encodeDoc(root, "ddpinitiator", "initiator")
}
