package config

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Target is the configuration of ddptarget: where it listens, the targets it
// exports and how. ParseTarget fills in every default, so a Target is always
// the effective configuration.
type Target struct {
	Portals       []Portal    // where to accept connections; default one TCP portal on 127.0.0.1:3260
	Targets       []TargetDef // at least one
	DiscoveryCHAP *CHAP       // CHAP for discovery sessions (SendTargets); nil: none
	Limits        Limits
	Log           Log
	Metrics       Metrics // the Prometheus endpoint; off by default
	Control       Control // the control socket of "ddptarget status"
	State         State   // where state that outlives the process is kept
}

// State is where ddptarget keeps what must survive a restart (YAML:
// dir): the persistent reservations an initiator registered with APTPL,
// one file per LUN under <dir>/pr/.
type State struct {
	Dir string // absolute path of a directory; default DefaultStateDir
}

// DefaultStateDir is the state directory of a configuration that names
// none (the FHS place for a daemon's state).
const DefaultStateDir = "/var/lib/ddpstore"

// PRStateFile is the file that keeps the persistent reservations of LUN
// lun of target name.
func (s State) PRStateFile(name string, lun int) string {
	return filepath.Join(s.Dir, "pr", name, fmt.Sprintf("lun%d.json", lun))
}

// Metrics is where a program serves Prometheus metrics (YAML: listen).
type Metrics struct {
	Listen string // host:port of the HTTP endpoint (/metrics); an empty host listens on every address; "": no endpoint
}

// Control is ddptarget's control socket (YAML: socket), which "ddptarget
// status" reads.
type Control struct {
	Socket string // absolute path of the unix socket; default DefaultControlSocket
}

// DefaultControlSocket is the control socket of a configuration that names
// none. ddptarget, run by a user other than root, puts it under the user's
// runtime directory instead (see docs/operations.md).
const DefaultControlSocket = "/run/ddpstore/ddptarget.sock"

// DefaultControl returns the control socket settings a configuration gets
// when it names none.
func DefaultControl() Control { return Control{Socket: DefaultControlSocket} }

// maxSocketPath is the longest unix socket path (sun_path holds 108 octets
// with the terminating NUL).
const maxSocketPath = 107

// Portal is one listening address (YAML: listen, transport, mpa).
type Portal struct {
	Listen    string // host:port as written; an empty host (":3260") listens on every address
	Transport string // TransportTCP (default), TransportSCTP, TransportSCTPUDP or TransportISCSITCP
	MPA       MPA    // MPA options, used by TCP portals only (SCTP carries DDP without MPA)
}

// The transports a portal can serve: iSER over DDP on one of its lower
// layers, or iSCSI without iSER over TCP.
const (
	TransportTCP      = "tcp"       // iSER: DDP with MPA over TCP (RFC 5044)
	TransportSCTP     = "sctp"      // iSER: DDP over kernel SCTP (RFC 5043)
	TransportSCTPUDP  = "sctp-udp"  // iSER: DDP over userspace SCTP over UDP
	TransportISCSITCP = "iscsi-tcp" // iSCSI over TCP without iSER (RFC 7143), for initiators without RDMA
)

// transports are what a portal can serve and an initiator can dial.
var transports = []string{TransportTCP, TransportSCTP, TransportSCTPUDP, TransportISCSITCP}

// socketKind is the kind of socket a transport listens on: portals of the
// same kind may not share a port.
func socketKind(transport string) string {
	switch transport {
	case TransportTCP, TransportISCSITCP:
		return "tcp"
	}
	return transport
}

// MPA holds the MPA options of a TCP portal (YAML: revision, markers, crc).
type MPA struct {
	Revision int  // 1 (RFC 5044) or 2 (RFC 6581); default 2
	Markers  bool // ask for Markers; default false
	CRC      bool // ask for CRCs; default true
}

// DefaultMPA returns the MPA options a portal gets when it names none.
func DefaultMPA() MPA { return MPA{Revision: 2, Markers: false, CRC: true} }

// TargetDef is one exported iSCSI target (YAML: name, alias, luns,
// initiators, chap, alua, immediate_data).
type TargetDef struct {
	Name       string   // the iSCSI name (CheckISCSIName)
	Alias      string   // TargetAlias, optional
	LUNs       []LUN    // at least one, ids distinct
	Initiators []string // iSCSI names allowed to log in; nil: any initiator
	CHAP       *CHAP    // nil: no authentication
	ALUA       *ALUA    // nil: one gateway, no ALUA
	// NoImmediateData is "immediate_data: false": the target offers
	// ImmediateData=No at login, so initiators send all write data when
	// the target asks for it (RDMA Read, R2T). Default false: Yes.
	NoImmediateData bool
}

// ALUA places this ddptarget among several gateways that export the same
// LUNs under the same target name (YAML: group, groups): its target port
// group (and relative target port) is Group, and Groups lists every
// gateway's group with the access state initiators are told. Each
// gateway's file lists the same Groups and its own Group.
type ALUA struct {
	Group  int         // 1..65535, one of Groups
	Groups []PortGroup // at least one; ids distinct
}

// PortGroup is one gateway's target port group (YAML: id, state).
type PortGroup struct {
	ID    int    // 1..65535
	State string // one of ALUAStates
}

// ALUAStates are the access states a port group may be given.
var ALUAStates = []string{"active-optimized", "active-non-optimized", "standby", "unavailable"}

// LUN is one logical unit of a target (YAML: id, path, memory, size,
// readonly). Exactly one of Path and Memory is set.
type LUN struct {
	ID       int    // 0..MaxLUNID
	Path     string // absolute path of a regular file or block device
	Memory   Size   // size of a memory-backed LUN
	RBD      RBD    // a Ceph RBD image (RBD.Image set)
	Size     Size   // with Path: the size of the file (needed when the daemon creates it); 0 when not given
	ReadOnly bool
}

// RBD names a Ceph RBD image that backs a LUN (YAML: pool, image, conf,
// user, keyring). Several gateways may export one image (see
// docs/scale-out.md).
type RBD struct {
	Pool    string // default DefaultRBDPool
	Image   string
	Conf    string // ceph.conf; default DefaultCephConf
	User    string // the client name without "client."; default DefaultCephUser
	Keyring string // optional: the conf's keyring otherwise
}

// The defaults of an RBD LUN.
const (
	DefaultRBDPool  = "rbd"
	DefaultCephConf = "/etc/ceph/ceph.conf"
	DefaultCephUser = "admin"
)

// MaxLUNID is the largest LUN id (the SAM flat addressing space).
const MaxLUNID = 16383

// CHAP holds CHAP credentials (YAML: user, secret, mutual_user,
// mutual_secret). User and Secret are what the initiator must present;
// MutualUser and MutualSecret, when set, are what the target presents back
// (mutual CHAP).
type CHAP struct {
	User, Secret             string
	MutualUser, MutualSecret string
}

// MinCHAPSecretLen is the shortest CHAP secret accepted, in octets: RFC 7143
// section 9.2.1 requires secrets of at least 96 bits unless IPsec protects
// the connection, and ddpstore has no IPsec.
const MinCHAPSecretLen = 12

// maxTextValue is the longest iSCSI text value (RFC 7143 section 6.1), which
// bounds CHAP user names and the target alias.
const maxTextValue = 255

// Limits bounds what the target accepts (YAML: max_sessions, queue_depth,
// max_logging_in, max_logging_in_per_address, login_timeout).
type Limits struct {
	MaxSessions int // sessions at once, 1..65535; default 64
	QueueDepth  int // commands in flight per session, 1..4096; default 128
	// Connections whose login has not completed: in all, and from one IP
	// address (1..65535; defaults 16 and 4); beyond them new connections
	// are closed at once. LoginTimeout is how long a login may take
	// (1s..1h; default 15s).
	MaxLoggingIn, MaxLoggingInPerAddress int
	LoginTimeout                         time.Duration
}

// DefaultLimits returns the limits a configuration gets when it names none.
func DefaultLimits() Limits {
	return Limits{MaxSessions: 64, QueueDepth: 128, MaxLoggingIn: 16, MaxLoggingInPerAddress: 4, LoginTimeout: 15 * time.Second}
}

// Log sets up logging (YAML: level, format).
type Log struct {
	Level  string // panic, fatal, error, warn, info (default), debug or trace
	Format string // text (default) or json
}

// DefaultLog returns the logging a configuration gets when it names none.
func DefaultLog() Log { return Log{Level: "info", Format: "text"} }

var (
	logLevels  = []string{"panic", "fatal", "error", "warn", "info", "debug", "trace"}
	logFormats = []string{"text", "json"}
)

// DefaultListen is the address of the portal a configuration without portals gets.
const DefaultListen = "127.0.0.1:3260"

// defaultTargetYAML is what ddptarget runs when no file is given.
//
//go:embed default-target.yaml
var defaultTargetYAML []byte

// DefaultTarget returns the embedded default configuration: one 1 GiB memory
// LUN (id 0) in target iqn.2026-11.io.ddpstore:default on 127.0.0.1:3260.
// Each call returns a new Target the caller may change.
func DefaultTarget() *Target {
	t, err := ParseTarget("default-target.yaml (embedded)", defaultTargetYAML)
	if err != nil {
		panic("config: the embedded default target configuration is invalid: " + err.Error())
	}
	return t
}

// maxFileSize bounds what LoadTarget and LoadInitiator read.
const maxFileSize = 16 << 20

// LoadTarget reads and parses the target configuration in the file at path.
func LoadTarget(path string) (*Target, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTarget(path, data)
}

// readFile reads a configuration file of at most maxFileSize octets.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err // an *os.PathError, which names the file
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %s: not a configuration file", path, Size(maxFileSize))
	}
	return data, nil
}

// ParseTarget parses a target configuration, checks it and fills in its
// defaults. filename is used only in messages. On error it returns every
// defect found, each an *Error naming file:line and the field, joined with
// errors.Join in the order of the file.
func ParseTarget(filename string, data []byte) (*Target, error) {
	d := newDecoder(filename)
	root := d.document(data)
	if root == nil {
		return nil, d.err()
	}
	t := d.target(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	return t, nil
}

var (
	targetFields    = []string{"portals", "targets", "discovery_chap", "limits", "log", "metrics", "control", "state"}
	portalFields    = []string{"listen", "transport", "mpa"}
	mpaFields       = []string{"revision", "markers", "crc"}
	targetDefFields = []string{"name", "alias", "luns", "initiators", "chap", "alua", "immediate_data"}
	aluaFields      = []string{"group", "groups"}
	portGroupFields = []string{"id", "state"}
	lunFields       = []string{"id", "path", "memory", "rbd", "size", "readonly"}
	rbdFields       = []string{"pool", "image", "conf", "user", "keyring"}
	chapFields      = []string{"user", "secret", "mutual_user", "mutual_secret"}
	limitsFields    = []string{"max_sessions", "queue_depth", "max_logging_in", "max_logging_in_per_address", "login_timeout"}
	logFields       = []string{"level", "format"}
	metricsFields   = []string{"listen"}
	controlFields   = []string{"socket"}
	stateFields     = []string{"dir"}
)

// targetChecks gathers what is checked across the whole file.
type targetChecks struct {
	names   map[string]string    // target name -> where it first is
	paths   map[string]pathOwner // cleaned LUN path -> first LUN using it
	secrets []secretUse          // every CHAP secret, for the one-way/mutual rule
}

type pathOwner struct {
	path     string // field path of the LUN
	pos      string // where its path is
	readOnly bool
}

type secretUse struct {
	mutual bool
	secret string
	node   *yaml.Node
	path   string // field path of the CHAP mapping
}

func (d *decoder) target(root *yaml.Node) *Target {
	t := &Target{Limits: DefaultLimits(), Log: DefaultLog(), Control: DefaultControl(), State: State{Dir: DefaultStateDir}}
	f, ok := d.mapping(root, "", "a target configuration", targetFields)
	if !ok {
		return t
	}
	c := &targetChecks{names: map[string]string{}, paths: map[string]pathOwner{}}
	if pf, ok := f["portals"]; ok {
		t.Portals = d.portals(pf)
	} else {
		t.Portals = []Portal{{Listen: DefaultListen, Transport: TransportTCP, MPA: DefaultMPA()}}
	}
	if tf, ok := f["targets"]; ok {
		items, ok := d.sequence(tf, "targets", "targets")
		if ok && len(items) == 0 {
			d.errorf(d.resolve(tf.val), "targets", "empty: a configuration exports at least one target")
		}
		for i, item := range items {
			t.Targets = append(t.Targets, d.targetDef(item, index("targets", i), c))
		}
	} else {
		d.missing(root, "", "targets", "a configuration exports at least one target")
	}
	if cf, ok := f["discovery_chap"]; ok {
		t.DiscoveryCHAP = d.chap(cf, "discovery_chap", &c.secrets)
	}
	if lf, ok := f["limits"]; ok {
		t.Limits = d.limits(lf)
	}
	if lf, ok := f["log"]; ok {
		t.Log = d.log(lf)
	}
	if mf, ok := f["metrics"]; ok {
		if mm, ok := d.mapping(mf.val, "metrics", "metrics", metricsFields); ok {
			if lf, has := mm["listen"]; has {
				t.Metrics.Listen = d.metricsListen(lf, "metrics.listen", t.Portals)
			}
		}
	}
	if cf, ok := f["control"]; ok {
		if cm, ok := d.mapping(cf.val, "control", "control", controlFields); ok {
			if sf, has := cm["socket"]; has {
				if v, ok := d.socketPath(sf, "control.socket"); ok {
					t.Control.Socket = v
				}
			}
		}
	}
	if sf, ok := f["state"]; ok {
		if sm, ok := d.mapping(sf.val, "state", "state", stateFields); ok {
			if df, has := sm["dir"]; has {
				if v, ok := d.str(df, "state.dir", "an absolute path"); ok {
					if !filepath.IsAbs(v) {
						d.errorf(d.resolve(df.val), "state.dir", "%q is relative: write an absolute path, as %s", clip(v), DefaultStateDir)
					} else {
						t.State.Dir = filepath.Clean(v)
					}
				}
			}
		}
	}
	d.checkSecrets(c.secrets)
	return t
}

// metricsListen reads the address of a metrics endpoint: host:port, an
// empty host for every address, and not the address of a tcp portal.
func (d *decoder) metricsListen(f field, path string, portals []Portal) string {
	s, ok := d.str(f, path, "host:port")
	if !ok {
		return ""
	}
	n := d.resolve(f.val)
	hp, err := parseHostPort(s, true)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return ""
	}
	for i, p := range portals {
		if socketKind(p.Transport) != "tcp" {
			continue
		}
		php, err := parseHostPort(p.Listen, true)
		if err == nil && php.port == hp.port && (php.host == hp.host || php.wildcard || hp.wildcard) {
			d.errorf(n, path, "%s is also where portals[%d] (%s) listens: give the metrics endpoint a port of its own", clip(s), i, p.Listen)
			return ""
		}
	}
	return s
}

// socketPath reads the path of a unix socket: absolute, and short enough
// for sun_path.
func (d *decoder) socketPath(f field, path string) (string, bool) {
	s, ok := d.str(f, path, "an absolute path")
	if !ok {
		return "", false
	}
	n := d.resolve(f.val)
	switch {
	case !filepath.IsAbs(s):
		d.errorf(n, path, "%q is relative: write an absolute path, as %s", clip(s), DefaultControlSocket)
		return "", false
	case len(s) > maxSocketPath:
		d.errorf(n, path, "%d octets long: a unix socket path holds at most %d", len(s), maxSocketPath)
		return "", false
	case strings.HasSuffix(s, "/"):
		d.errorf(n, path, "%q names a directory: give the socket's file name too, as %s", clip(s), DefaultControlSocket)
		return "", false
	}
	return s, true
}

// portals reads the portals list and checks that no two listen on the same
// address, port and transport.
func (d *decoder) portals(f field) []Portal {
	items, ok := d.sequence(f, "portals", "portals")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(d.resolve(f.val), "portals", "empty: list at least one portal, or leave portals out for the default %s", DefaultListen)
		return nil
	}
	type groupKey struct {
		transport string
		port      int
	}
	type group struct {
		hosts    map[string]int // host -> line of its first portal
		wildcard int            // line of the first portal on every address
		first    int            // line of the first portal of the group
	}
	groups := map[groupKey]*group{}
	var out []Portal
	for i, item := range items {
		path := index("portals", i)
		p, listen, hp, ok := d.portal(item, path)
		out = append(out, p)
		if !ok {
			continue
		}
		k := groupKey{socketKind(p.Transport), hp.port}
		g := groups[k]
		if g == nil {
			g = &group{hosts: map[string]int{}, first: listen.Line}
			groups[k] = g
		}
		lp := join(path, "listen")
		switch line, dup := g.hosts[hp.host]; {
		case dup || hp.wildcard && g.wildcard != 0:
			if !dup {
				line = g.wildcard
			}
			d.errorf(listen, lp, "duplicate portal: %s %s is the same address as the portal at line %d", p.Transport, p.Listen, line)
			continue
		case g.wildcard != 0:
			d.errorf(listen, lp, "%s %s overlaps the portal at line %d, which listens on every address on port %d", p.Transport, p.Listen, g.wildcard, hp.port)
			continue
		case hp.wildcard && len(g.hosts) > 0:
			d.errorf(listen, lp, "%s %s listens on every address on port %d, which overlaps the portal at line %d", p.Transport, p.Listen, hp.port, g.first)
			continue
		}
		g.hosts[hp.host] = listen.Line
		if hp.wildcard {
			g.wildcard = listen.Line
		}
	}
	return out
}

// portal reads one portal. ok reports a valid listen address and transport,
// which are then returned for the duplicate check.
func (d *decoder) portal(item *yaml.Node, path string) (p Portal, listen *yaml.Node, hp hostPort, ok bool) {
	p = Portal{Transport: TransportTCP, MPA: DefaultMPA()}
	f, fok := d.mapping(item, path, "a portal", portalFields)
	if !fok {
		return p, nil, hp, false
	}
	listenOK, transportOK := false, true
	if lf, has := f["listen"]; has {
		if s, sok := d.str(lf, join(path, "listen"), "host:port"); sok {
			listen = d.resolve(lf.val)
			var err error
			if hp, err = parseHostPort(s, true); err != nil {
				d.errorf(listen, join(path, "listen"), "%v", err)
			} else {
				p.Listen, listenOK = s, true
			}
		}
	} else {
		d.missing(item, path, "listen", "a portal needs an address to listen on, as 127.0.0.1:3260")
	}
	if tf, has := f["transport"]; has {
		p.Transport, transportOK = d.oneOf(tf, join(path, "transport"), "a transport", transports)
	}
	if mf, has := f["mpa"]; has {
		if transportOK && p.Transport != TransportTCP {
			why := "DDP runs over SCTP without it (RFC 5043)"
			if p.Transport == TransportISCSITCP {
				why = "iSCSI over TCP carries no DDP"
			}
			d.errorf(mf.key, join(path, "mpa"), "only tcp portals use MPA: %s; remove mpa", why)
		} else {
			p.MPA = d.mpa(mf, join(path, "mpa"))
		}
	}
	return p, listen, hp, listenOK && transportOK
}

func (d *decoder) mpa(f field, path string) MPA {
	m := DefaultMPA()
	mf, ok := d.mapping(f.val, path, "mpa", mpaFields)
	if !ok {
		return m
	}
	if rf, has := mf["revision"]; has {
		if v, ok := d.mpaRevision(rf, join(path, "revision")); ok {
			m.Revision = v
		}
	}
	if bf, has := mf["markers"]; has {
		m.Markers, _ = d.boolean(bf, join(path, "markers"))
	}
	if bf, has := mf["crc"]; has {
		if v, ok := d.boolean(bf, join(path, "crc")); ok {
			m.CRC = v
		}
	}
	return m
}

// mpaRevision reads an MPA revision, 1 or 2.
func (d *decoder) mpaRevision(f field, path string) (int, bool) {
	v, ok := d.integerHint(f, path, "MPA revision", 1, 2, ": 1 is RFC 5044, 2 adds the RFC 6581 startup")
	return int(v), ok
}

func (d *decoder) targetDef(item *yaml.Node, path string, c *targetChecks) TargetDef {
	var t TargetDef
	f, ok := d.mapping(item, path, "a target", targetDefFields)
	if !ok {
		return t
	}
	if nf, has := f["name"]; has {
		if s, n, ok := d.iscsiName(nf, join(path, "name")); ok {
			if line, dup := c.names[s]; dup {
				d.errorf(n, join(path, "name"), "duplicate target name %q (first at %s)", s, line)
			} else {
				c.names[s] = d.pos(n)
				t.Name = s
			}
		}
	} else {
		d.missing(item, path, "name", "a target needs an iSCSI name, as iqn.2026-11.io.example:disk1")
	}
	if af, has := f["alias"]; has {
		if s, ok := d.str(af, join(path, "alias"), "a target alias"); ok {
			if len(s) > maxTextValue {
				d.errorf(d.resolve(af.val), join(path, "alias"), "%d octets long, the limit is %d (an iSCSI text value)", len(s), maxTextValue)
			} else {
				t.Alias = s
			}
		}
	}
	if lf, has := f["luns"]; has {
		t.LUNs = d.luns(lf, join(path, "luns"), c)
	} else {
		d.missing(item, path, "luns", "a target needs at least one LUN")
	}
	if inf, has := f["initiators"]; has {
		t.Initiators = d.initiators(inf, join(path, "initiators"))
	}
	if cf, has := f["chap"]; has {
		t.CHAP = d.chap(cf, join(path, "chap"), &c.secrets)
	}
	if af, has := f["alua"]; has {
		t.ALUA = d.alua(af, join(path, "alua"))
	}
	if bf, has := f["immediate_data"]; has {
		if v, ok := d.boolean(bf, join(path, "immediate_data")); ok {
			t.NoImmediateData = !v
		}
	}
	return t
}

// alua reads a target's ALUA settings: its group, one of the groups, whose
// ids are distinct.
func (d *decoder) alua(f field, path string) *ALUA {
	m, ok := d.mapping(f.val, path, "alua", aluaFields)
	if !ok {
		return nil
	}
	a := &ALUA{}
	ids := map[int]string{}
	if gf, has := m["groups"]; has {
		items, ok := d.sequence(gf, join(path, "groups"), "port groups")
		if ok && len(items) == 0 {
			d.errorf(d.resolve(gf.val), join(path, "groups"), "empty: list every gateway's group, this one's included")
		}
		for i, item := range items {
			gp := index(join(path, "groups"), i)
			gm, ok := d.mapping(item, gp, "a port group", portGroupFields)
			if !ok {
				continue
			}
			var g PortGroup
			if idf, has := gm["id"]; has {
				if v, ok := d.integer(idf, join(gp, "id"), "target port group id", 1, 65535); ok {
					g.ID = int(v)
					if line, dup := ids[g.ID]; dup {
						d.errorf(d.resolve(idf.val), join(gp, "id"), "duplicate port group id %d (first at %s)", g.ID, line)
					}
					ids[g.ID] = d.pos(d.resolve(idf.val))
				}
			} else {
				d.missing(item, gp, "id", "each port group needs an id, 1..65535")
			}
			g.State = ALUAStates[0]
			if sf, has := gm["state"]; has {
				if v, ok := d.oneOf(sf, join(gp, "state"), "an ALUA state", ALUAStates); ok {
					g.State = v
				}
			}
			a.Groups = append(a.Groups, g)
		}
	} else {
		d.missing(f.val, path, "groups", "list every gateway's port group, this one's included")
	}
	if gf, has := m["group"]; has {
		if v, ok := d.integer(gf, join(path, "group"), "target port group id", 1, 65535); ok {
			a.Group = int(v)
			if _, listed := ids[a.Group]; !listed && len(ids) > 0 {
				d.errorf(d.resolve(gf.val), join(path, "group"), "%d is not among the groups", a.Group)
			}
		}
	} else {
		d.missing(f.val, path, "group", "this gateway's port group, one of groups")
	}
	return a
}

func (d *decoder) luns(f field, path string, c *targetChecks) []LUN {
	items, ok := d.sequence(f, path, "LUNs")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(d.resolve(f.val), path, "empty: a target needs at least one LUN")
		return nil
	}
	ids := map[int]string{} // id -> where it first is
	out := make([]LUN, 0, len(items))
	for i, item := range items {
		lp := index(path, i)
		lun, idNode, ok := d.lun(item, lp, c)
		out = append(out, lun)
		if !ok {
			continue
		}
		if line, dup := ids[lun.ID]; dup {
			d.errorf(idNode, join(lp, "id"), "duplicate LUN id %d (first at %s)", lun.ID, line)
			continue
		}
		ids[lun.ID] = d.pos(idNode)
	}
	return out
}

// lun reads one LUN; ok reports a valid id, returned with its node for the
// duplicate check.
func (d *decoder) lun(item *yaml.Node, path string, c *targetChecks) (l LUN, idNode *yaml.Node, ok bool) {
	f, fok := d.mapping(item, path, "a LUN", lunFields)
	if !fok {
		return l, nil, false
	}
	if idf, has := f["id"]; has {
		if v, vok := d.integer(idf, join(path, "id"), "LUN id", 0, MaxLUNID); vok {
			l.ID, idNode, ok = int(v), d.resolve(idf.val), true
		}
	} else {
		d.missing(item, path, "id", fmt.Sprintf("each LUN needs an id, 0..%d", MaxLUNID))
	}
	pf, hasPath := f["path"]
	mf, hasMemory := f["memory"]
	rf, hasRBD := f["rbd"]
	switch given := lunBackings(f); {
	case len(given) > 1:
		later := given[0].key
		for _, g := range given[1:] {
			if g.key.Line > later.Line || g.key.Line == later.Line && g.key.Column > later.Column {
				later = g.key
			}
		}
		d.errorf(later, path, "path, memory and rbd exclude each other: a LUN is backed by a file or block device (path), by memory or by a Ceph RBD image (rbd)")
	case len(given) == 0:
		d.errorf(d.resolve(item), path, "neither path, memory nor rbd: a LUN is backed by a file or block device (path: /absolute/file), by memory (memory: 1GiB) or by a Ceph RBD image (rbd: {pool: rbd, image: disk1})")
	}
	if hasRBD {
		l.RBD = d.rbd(rf, join(path, "rbd"))
		if l.RBD.Image != "" && !hasPath && !hasMemory {
			key := l.RBD.Pool + "/" + l.RBD.Image
			n := d.resolve(rf.val)
			if first, dup := c.paths["rbd:"+key]; dup && !(first.readOnly && l.ReadOnly) {
				d.errorf(n, join(path, "rbd"), "image %s is already the backing store of %s (%s): two LUNs on one image would corrupt each other's data unless both are readonly (several gateways export one image as one LUN each)", clip(key), first.path, first.pos)
			} else if !dup {
				c.paths["rbd:"+key] = pathOwner{path: path, pos: d.pos(n), readOnly: l.ReadOnly}
			}
		}
	}
	var pathOK bool
	if hasPath {
		pp := join(path, "path")
		if s, sok := d.str(pf, pp, "an absolute path"); sok {
			if !filepath.IsAbs(s) {
				d.errorf(d.resolve(pf.val), pp, "%q is relative: write an absolute path", clip(s))
			} else {
				l.Path, pathOK = s, true
			}
		}
	}
	if hasMemory {
		if s, sok := d.size(mf, join(path, "memory")); sok && d.blocks(mf, join(path, "memory"), s) {
			l.Memory = s
		}
	}
	if sf, has := f["size"]; has {
		if hasRBD && !hasPath {
			d.errorf(sf.key, join(path, "size"), "size goes with path: an RBD LUN's size is its image's (rbd resize changes it)")
		} else if hasMemory && !hasPath {
			d.errorf(sf.key, join(path, "size"), "size goes with path: a memory LUN's size is its memory value")
		} else if s, sok := d.size(sf, join(path, "size")); sok && d.blocks(sf, join(path, "size"), s) {
			l.Size = s
		}
	}
	if rf, has := f["readonly"]; has {
		l.ReadOnly, _ = d.boolean(rf, join(path, "readonly"))
	}
	if pathOK && !hasMemory && !hasRBD {
		clean := filepath.Clean(l.Path)
		n := d.resolve(pf.val)
		if first, dup := c.paths[clean]; dup && !(first.readOnly && l.ReadOnly) {
			d.errorf(n, join(path, "path"), "%q is already the backing store of %s (%s): two LUNs on one store would corrupt each other's data unless both are readonly", clip(l.Path), first.path, first.pos)
		} else if !dup {
			c.paths[clean] = pathOwner{path: path, pos: d.pos(n), readOnly: l.ReadOnly}
		}
	}
	return l, idNode, ok
}

// lunBackings returns the fields of f that name a LUN's backing store.
func lunBackings(f map[string]field) []field {
	var given []field
	for _, k := range []string{"path", "memory", "rbd"} {
		if v, has := f[k]; has {
			given = append(given, v)
		}
	}
	return given
}

// rbd reads an RBD LUN's image: image is required, the rest default.
func (d *decoder) rbd(f field, path string) RBD {
	r := RBD{Pool: DefaultRBDPool, Conf: DefaultCephConf, User: DefaultCephUser}
	m, ok := d.mapping(f.val, path, "rbd", rbdFields)
	if !ok {
		return RBD{}
	}
	name := func(k, want string, dst *string) {
		if v, has := m[k]; has {
			if s, ok := d.str(v, join(path, k), want); ok {
				if strings.ContainsAny(s, "/@") {
					d.errorf(d.resolve(v.val), join(path, k), "%q: a Ceph %s name has no '/' or '@'", clip(s), k)
					return
				}
				*dst = s
			}
		}
	}
	file := func(k string, dst *string) {
		if v, has := m[k]; has {
			if s, ok := d.str(v, join(path, k), "an absolute path"); ok {
				if !filepath.IsAbs(s) {
					d.errorf(d.resolve(v.val), join(path, k), "%q is relative: write an absolute path", clip(s))
					return
				}
				*dst = s
			}
		}
	}
	name("pool", "a pool name", &r.Pool)
	name("user", "a Ceph client name without \"client.\"", &r.User)
	file("conf", &r.Conf)
	file("keyring", &r.Keyring)
	if _, has := m["image"]; has {
		name("image", "an image name", &r.Image)
	} else {
		d.missing(f.val, path, "image", "the RBD image to export, as rbd ls lists it")
	}
	if strings.HasPrefix(r.User, "client.") {
		d.errorf(d.resolve(m["user"].val), join(path, "user"), "%q: write the client name without \"client.\" (%s)", clip(r.User), strings.TrimPrefix(r.User, "client."))
	}
	if r.Image == "" {
		return RBD{}
	}
	return r
}

// blocks checks that a LUN size is a positive whole number of blocks.
func (d *decoder) blocks(f field, path string, s Size) bool {
	n := d.resolve(f.val)
	switch {
	case s == 0:
		d.errorf(n, path, "0 octets: a LUN holds at least one %d-octet block", BlockSize)
		return false
	case s%BlockSize != 0:
		down, up := s-s%BlockSize, s-s%BlockSize+BlockSize
		hint := fmt.Sprintf("%s or %s", down, up)
		if down == 0 || up < 0 {
			hint = Size(BlockSize).String()
			if down != 0 {
				hint = down.String()
			}
		}
		d.errorf(n, path, "%s is not a whole number of %d-octet blocks (use %s)", s, BlockSize, hint)
		return false
	}
	return true
}

func (d *decoder) initiators(f field, path string) []string {
	items, ok := d.sequence(f, path, "iSCSI names")
	if !ok {
		return nil
	}
	seen := map[string]string{}
	var out []string
	for i, item := range items {
		ip := index(path, i)
		s, n, ok := d.iscsiName(field{val: item}, ip)
		if !ok {
			continue
		}
		if line, dup := seen[s]; dup {
			d.errorf(n, ip, "duplicate initiator %q (first at %s)", s, line)
		} else {
			seen[s] = d.pos(n)
			out = append(out, s)
		}
	}
	return out
}

// chap reads CHAP credentials: user and secret together, and mutual_user and
// mutual_secret together and only with them. The secrets are added to
// secrets for checkSecrets.
func (d *decoder) chap(f field, path string, secrets *[]secretUse) *CHAP {
	cf, ok := d.mapping(f.val, path, "chap", chapFields)
	if !ok {
		return nil
	}
	var ch CHAP
	valid := true
	text := func(name string, dst *string, secret bool) {
		ff, has := cf[name]
		if !has {
			return
		}
		p := join(path, name)
		want := "a CHAP user name"
		if secret {
			want = "a CHAP secret"
		}
		s, ok := d.str(ff, p, want)
		if !ok {
			valid = false
			return
		}
		n := d.resolve(ff.val)
		switch {
		case secret && len(s) < MinCHAPSecretLen:
			d.errorf(n, p, "too short (%d octets): RFC 7143 section 9.2.1 requires at least 96 bits (%d octets) of secret unless IPsec protects the connection, and ddpstore has no IPsec", len(s), MinCHAPSecretLen)
			valid = false
		case !secret && len(s) > maxTextValue:
			d.errorf(n, p, "%d octets long, the limit is %d (an iSCSI text value)", len(s), maxTextValue)
			valid = false
		default:
			*dst = s
			if secret {
				*secrets = append(*secrets, secretUse{mutual: name == "mutual_secret", secret: s, node: n, path: path})
			}
		}
	}
	text("user", &ch.User, false)
	text("secret", &ch.Secret, true)
	text("mutual_user", &ch.MutualUser, false)
	text("mutual_secret", &ch.MutualSecret, true)

	pair := func(user, secret string) (ok bool, one string) {
		u, s := cf.has(user), cf.has(secret)
		switch {
		case u && !s:
			return false, fmt.Sprintf("%s without %s: give both", user, secret)
		case s && !u:
			return false, fmt.Sprintf("%s without %s: give both", secret, user)
		}
		return u && s, ""
	}
	oneWay, msg1 := pair("user", "secret")
	mutual, msg2 := pair("mutual_user", "mutual_secret")
	switch {
	case msg1 != "":
		d.errorf(f.key, path, "%s", msg1)
		valid = false
	case !oneWay && (mutual || msg2 != ""):
		d.errorf(f.key, path, "mutual CHAP needs one-way CHAP too: the target answers only an initiator that has authenticated (give user and secret)")
		valid = false
	case !oneWay:
		d.errorf(f.key, path, "no credentials: give user and secret (and for mutual CHAP mutual_user and mutual_secret), or leave %s out", f.key.Value)
		valid = false
	}
	if msg2 != "" && oneWay {
		d.errorf(f.key, path, "%s", msg2)
		valid = false
	}
	if !valid {
		return nil
	}
	return &ch
}

// checkSecrets enforces RFC 7143 section 9.2.1: a secret that authenticates
// initiators (secret) must not authenticate targets (mutual_secret), anywhere
// in the configuration. Messages never show the secrets.
func (d *decoder) checkSecrets(uses []secretUse) {
	oneWay := map[string]secretUse{}
	for _, u := range uses {
		if _, seen := oneWay[u.secret]; !u.mutual && !seen {
			oneWay[u.secret] = u
		}
	}
	for _, u := range uses {
		if !u.mutual {
			continue
		}
		if w, clash := oneWay[u.secret]; clash {
			where := "secret"
			if w.path != u.path {
				where = fmt.Sprintf("%s.secret (%s)", w.path, d.pos(w.node))
			}
			d.errorf(u.node, join(u.path, "mutual_secret"), "the same as %s: RFC 7143 section 9.2.1 forbids one secret authenticating both initiators and targets", where)
		}
	}
}

func (d *decoder) limits(f field) Limits {
	l := DefaultLimits()
	lf, ok := d.mapping(f.val, "limits", "limits", limitsFields)
	if !ok {
		return l
	}
	if mf, has := lf["max_sessions"]; has {
		if v, ok := d.integer(mf, "limits.max_sessions", "max_sessions", 1, 65535); ok {
			l.MaxSessions = int(v)
		}
	}
	if qf, has := lf["queue_depth"]; has {
		if v, ok := d.integer(qf, "limits.queue_depth", "queue_depth", 1, 4096); ok {
			l.QueueDepth = int(v)
		}
	}
	if mf, has := lf["max_logging_in"]; has {
		if v, ok := d.integer(mf, "limits.max_logging_in", "max_logging_in", 1, 65535); ok {
			l.MaxLoggingIn = int(v)
		}
	}
	if mf, has := lf["max_logging_in_per_address"]; has {
		if v, ok := d.integer(mf, "limits.max_logging_in_per_address", "max_logging_in_per_address", 1, 65535); ok {
			l.MaxLoggingInPerAddress = int(v)
		}
	}
	if tf, has := lf["login_timeout"]; has {
		if v, ok := d.duration(tf, "limits.login_timeout", "login timeout", minTimeout, maxTimeout, ""); ok {
			l.LoginTimeout = v
		}
	}
	return l
}

func (d *decoder) log(f field) Log {
	l := DefaultLog()
	lf, ok := d.mapping(f.val, "log", "log", logFields)
	if !ok {
		return l
	}
	if vf, has := lf["level"]; has {
		if v, ok := d.logLevel(vf, "log.level"); ok {
			l.Level = v
		}
	}
	if vf, has := lf["format"]; has {
		if v, ok := d.logFormat(vf, "log.format"); ok {
			l.Format = v
		}
	}
	return l
}

// logLevel reads a log level, panic to trace.
func (d *decoder) logLevel(f field, path string) (string, bool) {
	return d.oneOf(f, path, "a log level", logLevels)
}

// logFormat reads a log format, text or json.
func (d *decoder) logFormat(f field, path string) (string, bool) {
	return d.oneOf(f, path, "a log format", logFormats)
}
