package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/blockdev/rbd"
	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/metrics"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
)

// daemon is a running target: its RNIC, server, listeners and LUs.
type daemon struct {
	log    *log.Entry
	dev    *iwarp.Device
	srv    *target.Server
	obs    *metrics.Target   // counts what srv does, for /metrics and status
	msrv   *metrics.Server   // the metrics endpoint, or nil
	ctl    *net.UnixListener // the control socket, or nil
	failed chan error
	wg     sync.WaitGroup

	started     time.Time
	cfgPath     string // the configuration file, for status
	metricsAddr string

	mu      sync.Mutex
	cfg     *config.Target     // the configuration in force (reloads replace it)
	luns    map[lunKey]*openLU // by target and LUN id
	retired []*openLU          // stores of removed LUs, closed once unregistered
	nextID  uint64
	addrs   []string // the listeners' addresses
}

type lunKey struct {
	target string
	id     int
}

// openLU is an LU with the config it was built from, so a reload reuses
// LUs whose definition did not change (a memory LUN keeps its data).
type openLU struct {
	def     config.LUN
	store   blockdev.Store
	lu      *lu.LU
	created os.FileInfo // the file open created for the store, or nil
	// shared holds the persistent reservations of an RBD LUN in the
	// cluster, for every gateway exporting the image; nil for the others.
	shared *rbd.Shared
}

// close closes the LU's shared reservation object and its store.
func (o *openLU) close() error {
	if o.shared != nil {
		if err := o.shared.Close(); err != nil {
			log.Warnf("ddptarget: %v", err)
		}
		o.shared = nil
	}
	return o.store.Close()
}

// start opens every store, builds the targets, listens on every portal,
// and opens the metrics endpoint and the control socket. When it fails it
// leaves nothing behind: the listeners it opened and the stores are
// closed, and the store files it created are removed. source names the
// configuration for status: its file, or "" for the embedded default.
func start(cfg *config.Target, logger *log.Entry, source string) (*daemon, error) {
	d := &daemon{log: logger, dev: iwarp.NewDevice(0), failed: make(chan error, 1), luns: map[lunKey]*openLU{},
		obs: metrics.NewTarget(), cfg: cfg, cfgPath: source, started: time.Now()}
	d.obs.RNIC.Set(d.dev.Counters)
	if d.cfgPath == "" {
		d.cfgPath = "(embedded default)"
	}
	var lns []portalListener
	started := false
	defer func() {
		if !started {
			for _, l := range lns {
				l.Close()
			}
			if d.msrv != nil {
				d.msrv.Close()
			}
			if d.ctl != nil {
				d.ctl.Close()
			}
			d.dev.Close()
			d.discard()
		}
	}()
	exports, err := d.build(cfg)
	if err != nil {
		return nil, err
	}
	var portals []login.Portal
	for _, p := range cfg.Portals {
		network := p.Transport // tcp, sctp (kernel) or sctp-udp: the iwarp networks
		if network == "" {
			network = "tcp"
		}
		var pl portalListener
		if network == config.TransportISCSITCP {
			ln, err := net.Listen("tcp", p.Listen)
			if err != nil {
				return nil, listenError("tcp", p.Listen, err)
			}
			pl = portalListener{Closer: ln, addr: ln.Addr(), serve: func() error { return d.srv.ServeTCP(ln) }}
		} else {
			ln, err := d.dev.Listen(network, p.Listen, iwarp.ConnConfig{MPA: mpa.StartupConfig{
				Revision: uint8(p.MPA.Revision), Markers: p.MPA.Markers, NoCRC: !p.MPA.CRC}, ReadSpin: iwarp.DefaultReadSpin})
			if err != nil {
				return nil, listenError(network, p.Listen, err)
			}
			pl = portalListener{Closer: ln, addr: ln.Addr(), serve: func() error { return d.srv.Serve(ln) }}
		}
		pl.transport = network
		lns = append(lns, pl)
		portals = append(portals, login.Portal{Addr: pl.addr.String(), TPGT: 1})
		d.addrs = append(d.addrs, pl.addr.String())
	}
	d.srv, err = target.NewServer(d.dev, target.Config{
		Exports: exports, Discovery: loginCHAP(cfg.DiscoveryCHAP), Portals: portals,
		QueueDepth: cfg.Limits.QueueDepth, MaxSessions: cfg.Limits.MaxSessions, Log: logger, Observer: d.obs,
		TCPReadSpin:  iwarp.DefaultReadSpin,
		MaxLoggingIn: cfg.Limits.MaxLoggingIn, MaxLoggingInPerPeer: cfg.Limits.MaxLoggingInPerAddress, LoginTimeout: cfg.Limits.LoginTimeout,
	})
	if err != nil {
		return nil, err
	}
	d.addLUNs(cfg)
	if cfg.Metrics.Listen != "" {
		if d.msrv, err = metrics.Listen(cfg.Metrics.Listen, d.obs.Registry); err != nil {
			return nil, err
		}
		d.metricsAddr = d.msrv.Addr()
	}
	// A control socket the file names must open; the default one may be
	// another daemon's, or not ours to create: then this one runs without.
	path, explicit := controlPath(cfg)
	d.ctl, err = listenControl(path)
	switch {
	case err != nil && explicit:
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	case err != nil:
		logger.Warnf("ddptarget: no control socket (ddptarget status will not see this daemon): %s: %v; set control.socket", path, err)
	}
	started = true
	if d.ctl != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.serveControl(d.ctl) }()
		logger.Infof("ddptarget: control socket %s", d.ctl.Addr())
	}
	if d.msrv != nil {
		logger.Infof("ddptarget: metrics on http://%s/metrics", d.metricsAddr)
	}
	for _, ln := range lns {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := ln.serve(); err != nil {
				select {
				case d.failed <- fmt.Errorf("portal %s: %w", ln.addr, err):
				default:
				}
			}
		}()
		logger.Infof("ddptarget: listening on %s (%s)", ln.addr, ln.transport)
	}
	for _, e := range exports {
		logger.Infof("ddptarget: exporting %s, LUNs %v", e.Target.Name(), e.Target.LUNs())
	}
	return d, nil
}

// listenError says why a portal cannot listen, as "listen ADDR: CAUSE"
// ("listen sctp ADDR: CAUSE" for SCTP portals): the cause without the net
// package's "listen tcp ADDR: bind: ", which repeats what is known.
func listenError(network, addr string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
		var se *os.SyscallError
		if errors.As(err, &se) {
			err = se.Err
		}
	}
	if network != "tcp" {
		return fmt.Errorf("listen %s %s: %w", network, addr, err)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

// build opens (or reuses) the LUs of cfg and returns the exports.
func (d *daemon) build(cfg *config.Target) ([]target.Export, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := map[lunKey]*openLU{}
	var opened []*openLU
	fail := func(err error) ([]target.Export, error) {
		for _, o := range opened {
			o.close()
			o.removeCreated()
		}
		return nil, err
	}
	var exports []target.Export
	for _, t := range cfg.Targets {
		luns := map[uint16]*lu.LU{}
		for _, l := range t.LUNs {
			key := lunKey{t.Name, l.ID}
			if o := d.luns[key]; o != nil && o.def == l {
				next[key] = o
				luns[uint16(l.ID)] = o.lu
				continue
			}
			o, err := d.open(l, cfg.State.PRStateFile(t.Name, l.ID))
			if err != nil {
				return fail(fmt.Errorf("target %s LUN %d: %w", t.Name, l.ID, err))
			}
			opened = append(opened, o)
			next[key] = o
			luns[uint16(l.ID)] = o.lu
		}
		tg, err := lu.NewTarget(t.Name, luns)
		if err == nil && t.ALUA != nil {
			err = tg.SetPortGroups(uint16(t.ALUA.Group), portGroups(t.ALUA))
		}
		if err != nil {
			return fail(err)
		}
		exports = append(exports, target.Export{Target: tg, Initiators: t.Initiators, CHAP: loginCHAP(t.CHAP), Alias: t.Alias,
			NoImmediateData: t.NoImmediateData})
	}
	for key, o := range d.luns {
		if next[key] != o {
			d.retired = append(d.retired, o)
		}
	}
	d.luns = next
	return exports, nil
}

// open opens the store of LUN l and its LU. A LUN with a path keeps its
// persistent reservations (when an initiator asks for it, APTPL) in
// prState; a memory LUN, whose data does not outlive the process, keeps
// none.
func (d *daemon) open(l config.LUN, prState string) (*openLU, error) {
	var st blockdev.Store
	var created os.FileInfo
	var err error
	if l.Path != "" {
		// blockdev.Open creates a missing file: note that it did, so that
		// a failed start or reload removes the file again.
		_, statErr := os.Stat(l.Path)
		st, err = blockdev.Open(l.Path, int64(l.Size), l.ReadOnly)
		if err == nil && errors.Is(statErr, fs.ErrNotExist) {
			created, _ = os.Stat(l.Path)
		}
	} else if r := l.RBD; r.Image != "" {
		st, err = openRBD(r, l.ReadOnly)
	} else {
		st, err = blockdev.NewMemory(int64(l.Memory))
	}
	if err != nil {
		return nil, err
	}
	o := &openLU{def: l, store: st, created: created}
	d.nextID++
	if o.lu, err = lu.New(d.nextID, st); err == nil {
		switch {
		case l.Path != "":
			err = o.lu.SetPRStateFile(prState)
		case l.RBD.Image != "":
			err = o.shareReservations(l.RBD)
		}
	}
	if err != nil {
		o.close()
		o.removeCreated()
		return nil, err
	}
	return o, nil
}

// shareReservations keeps the persistent reservations of an RBD LUN in
// the object ddpstore.pr.<image> of the image's pool, so that every
// gateway exporting the image shares them (docs/scale-out.md).
func (o *openLU) shareReservations(r config.RBD) error {
	sh, err := rbd.OpenShared(rbd.Config{Pool: r.Pool, Conf: r.Conf, User: r.User, Keyring: r.Keyring}, "ddpstore.pr."+r.Image)
	if err != nil {
		return err
	}
	o.shared = sh
	return o.lu.SetSharedPR(sh)
}

// openRBD opens the RBD image of an rbd LUN; the image must exist and its
// size is the LUN's.
func openRBD(r config.RBD, readOnly bool) (blockdev.Store, error) {
	im, err := rbd.Open(rbd.Config{Pool: r.Pool, Image: r.Image, Conf: r.Conf, User: r.User, Keyring: r.Keyring, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	if im.Size() == 0 || im.Size()%blockdev.BlockSize != 0 {
		im.Close()
		return nil, fmt.Errorf("rbd: image %s/%s has %d octets, not a positive multiple of %d", r.Pool, r.Image, im.Size(), blockdev.BlockSize)
	}
	return im, nil
}

// removeCreated removes the store's file if open created it and it is
// still that file. The store must be closed.
func (o *openLU) removeCreated() {
	if o.created == nil {
		return
	}
	if fi, err := os.Stat(o.def.Path); err == nil && os.SameFile(fi, o.created) {
		os.Remove(o.def.Path)
	}
}

func loginCHAP(c *config.CHAP) *login.CHAP {
	if c == nil {
		return nil
	}
	return &login.CHAP{User: c.User, Secret: c.Secret, MutualUser: c.MutualUser, MutualSecret: c.MutualSecret}
}

// reload applies a new configuration's targets, LUNs, ACLs and CHAP.
// Portals, limits and logging take effect only at restart.
func (d *daemon) reload(cfg *config.Target) error {
	exports, err := d.build(cfg)
	if err != nil {
		return err
	}
	if err := d.srv.SetExports(exports); err != nil {
		return err
	}
	d.addLUNs(cfg)
	d.mu.Lock()
	next := *cfg // portals, limits, logging, metrics and control stay as started
	next.Portals, next.Limits, next.Log, next.Metrics, next.Control = d.cfg.Portals, d.cfg.Limits, d.cfg.Log, d.cfg.Metrics, d.cfg.Control
	d.cfg = &next
	d.mu.Unlock()
	// Sessions adopt the new LUN maps within a second; then the stores of
	// removed LUs are free to close.
	time.AfterFunc(3*time.Second, func() { d.closeStores(false) })
	return nil
}

// addLUNs creates the metrics of cfg's LUNs, so a scrape shows each one
// from the start.
func (d *daemon) addLUNs(cfg *config.Target) {
	for _, t := range cfg.Targets {
		for _, l := range t.LUNs {
			d.obs.AddLUN(t.Name, uint64(l.ID))
		}
	}
}

// closeStores syncs and closes retired stores (all stores when all),
// keeping those still registered by a session for a later try.
func (d *daemon) closeStores(all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if all {
		for _, o := range d.luns {
			d.retired = append(d.retired, o)
		}
		d.luns = map[lunKey]*openLU{}
	}
	var keep []*openLU
	for _, o := range d.retired {
		o.store.Sync(0, o.store.Size())
		if err := o.close(); err != nil {
			d.log.Warnf("ddptarget: closing a store: %v", err)
			keep = append(keep, o)
		}
	}
	d.retired = keep
}

// discard undoes a start that failed: it closes every store and removes
// the store files the start created.
func (d *daemon) discard() {
	d.mu.Lock()
	var created []*openLU
	for _, o := range d.luns {
		if o.created != nil {
			created = append(created, o)
		}
	}
	d.mu.Unlock()
	d.closeStores(true)
	for _, o := range created {
		o.removeCreated()
	}
}

// shutdown drains the sessions, then syncs and unmaps every store.
func (d *daemon) shutdown(ctx context.Context) error {
	if d.ctl != nil {
		d.ctl.Close() // removes the socket file
	}
	err := d.srv.Shutdown(ctx)
	d.wg.Wait()
	if d.msrv != nil {
		d.msrv.Close()
	}
	d.dev.Close()
	d.closeStores(true)
	if len(d.retired) > 0 {
		err = errors.Join(err, fmt.Errorf("%d stores could not be closed", len(d.retired)))
	}
	return err
}

// portalListener is one portal's listener: iwarp's for iSER portals,
// net's for iscsi-tcp ones.
type portalListener struct {
	io.Closer
	addr      net.Addr
	transport string
	serve     func() error
}

// portGroups turns a target's configured ALUA groups into the LU layer's.
func portGroups(a *config.ALUA) []lu.PortGroup {
	states := map[string]lu.ALUAState{"active-optimized": lu.ActiveOptimized,
		"active-non-optimized": lu.ActiveNonOptimized, "standby": lu.Standby, "unavailable": lu.Unavailable}
	var gs []lu.PortGroup
	for _, g := range a.Groups {
		gs = append(gs, lu.PortGroup{ID: uint16(g.ID), State: states[g.State]})
	}
	return gs
}
