package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/metrics"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Status is what "ddptarget status" shows: the answer of the control
// socket, as JSON.
type Status struct {
	PID      int             `json:"pid"`
	Started  time.Time       `json:"started"`
	Config   string          `json:"config"`            // the file, or "(embedded default)"
	Metrics  string          `json:"metrics,omitempty"` // the metrics endpoint's address
	Portals  []PortalStatus  `json:"portals"`
	Targets  []TargetStatus  `json:"targets"`
	Sessions []SessionStatus `json:"sessions"`
}

// PortalStatus is one listening portal.
type PortalStatus struct {
	Address   string `json:"address"`
	Transport string `json:"transport"` // tcp, sctp or sctp-udp
}

// TargetStatus is one exported target.
type TargetStatus struct {
	Name       string      `json:"name"`
	Alias      string      `json:"alias,omitempty"`
	Initiators []string    `json:"initiators,omitempty"` // who may log in; empty: anyone
	CHAP       bool        `json:"chap"`
	LUNs       []LUNStatus `json:"luns"`
}

// LUNStatus is one LUN and what it has done.
type LUNStatus struct {
	ID       int              `json:"id"`
	Size     int64            `json:"size"`    // octets
	Backing  string           `json:"backing"` // file, block device or memory
	Path     string           `json:"path,omitempty"`
	ReadOnly bool             `json:"readonly"`
	IO       metrics.IOCounts `json:"io"`
}

// SessionStatus is one connection. Initiator, Target and Kind are empty
// while it is still logging in.
type SessionStatus struct {
	Initiator string    `json:"initiator"`
	Target    string    `json:"target,omitempty"`
	Kind      string    `json:"kind"`
	Peer      string    `json:"peer"`
	Transport string    `json:"transport"`
	TSIH      uint16    `json:"tsih"`
	Since     time.Time `json:"since"`
	// Params is what the login negotiated; absent while logging in.
	Params *target.SessionParams `json:"params,omitempty"`
	// Commands answered and octets read and written in this session.
	Commands     uint64 `json:"commands"`
	ReadBytes    uint64 `json:"read_bytes"`
	WrittenBytes uint64 `json:"written_bytes"`
}

// status gathers the daemon's Status.
func (d *daemon) status() Status {
	d.mu.Lock()
	cfg := d.cfg
	st := Status{PID: os.Getpid(), Started: d.started, Config: d.cfgPath, Metrics: d.metricsAddr}
	for i, p := range cfg.Portals {
		ps := PortalStatus{Address: p.Listen, Transport: p.Transport}
		if i < len(d.addrs) {
			ps.Address = d.addrs[i]
		}
		st.Portals = append(st.Portals, ps)
	}
	for _, t := range cfg.Targets {
		ts := TargetStatus{Name: t.Name, Alias: t.Alias, Initiators: t.Initiators, CHAP: t.CHAP != nil, LUNs: []LUNStatus{}}
		for _, l := range t.LUNs {
			ls := LUNStatus{ID: l.ID, Path: l.Path, ReadOnly: l.ReadOnly, Backing: "memory", IO: d.obs.Counts(t.Name, uint64(l.ID))}
			if o := d.luns[lunKey{t.Name, l.ID}]; o != nil {
				ls.Size = o.store.Size()
			}
			if l.Path != "" {
				ls.Backing = "file"
				if fi, err := os.Stat(l.Path); err == nil && fi.Mode()&fs.ModeDevice != 0 {
					ls.Backing = "block device"
				}
			}
			ts.LUNs = append(ts.LUNs, ls)
		}
		st.Targets = append(st.Targets, ts)
	}
	d.mu.Unlock()
	st.Sessions = []SessionStatus{}
	for _, s := range d.srv.SessionList() {
		kind := strings.ToLower(s.Kind)
		if kind == "" {
			kind = "login"
		}
		ss := SessionStatus{Initiator: s.Initiator, Target: s.Target, Kind: kind,
			Peer: s.Peer, Transport: s.Transport, TSIH: s.TSIH, Since: s.Since,
			Commands: s.Commands, ReadBytes: s.ReadBytes, WrittenBytes: s.WrittenBytes}
		if s.Kind != "" {
			p := s.Params
			ss.Params = &p
		}
		st.Sessions = append(st.Sessions, ss)
	}
	return st
}

// controlPath is the control socket of cfg: control.socket, except that a
// user other than root with the default path gets one under their runtime
// directory ($XDG_RUNTIME_DIR/ddpstore, else /tmp/ddpstore-UID), as
// ddpinitiator's run directory. explicit reports a path the file gave.
func controlPath(cfg *config.Target) (path string, explicit bool) {
	p := cfg.Control.Socket
	if p != config.DefaultControlSocket {
		return p, true
	}
	if os.Geteuid() == 0 {
		return p, false
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ddpstore", "ddptarget.sock"), false
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ddpstore-%d", os.Getuid()), "ddptarget.sock"), false
}

// errControlInUse: another process answers on the control socket.
var errControlInUse = errors.New("another ddptarget is serving it")

// listenControl opens the control socket at path, mode 0600 (owned by the
// user running ddptarget: root under systemd), in a directory it creates
// (0755) when missing. A stale socket left by a daemon that died is
// replaced; a live one is not.
func listenControl(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, errControlInUse
		}
		os.Remove(path)
	}
	old := syscall.Umask(0o177) // the socket is created 0600: no moment when others may connect
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// serveControl answers on l until it is closed: each connection sends one
// line, "status", and gets the Status as JSON. Only root and the user
// running ddptarget are answered (the mode already says so; the peer's
// credentials are checked too).
func (d *daemon) serveControl(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				d.log.Warnf("ddptarget: control socket: %v", err)
			}
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer c.Close()
			d.answer(c, d.log)
		}()
	}
}

func (d *daemon) answer(c *net.UnixConn, logger *log.Entry) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	enc := json.NewEncoder(c)
	enc.SetIndent("", "  ")
	if uid, err := peerUID(c); err != nil || uid != 0 && uid != os.Geteuid() {
		logger.Warnf("ddptarget: control socket: refused a peer (uid %d, %v)", uid, err)
		enc.Encode(map[string]string{"error": "permission denied"})
		return
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	switch cmd := strings.TrimSpace(line); cmd {
	case "status":
		enc.Encode(d.status())
	default:
		enc.Encode(map[string]string{"error": fmt.Sprintf("unknown request %q; the requests are: status", cmd)})
	}
}

func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}
