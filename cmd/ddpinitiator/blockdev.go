package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/hostdev/ublk"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// attach --nbd and --ublk: a process of its own logs in and serves each
// LUN as a kernel block device, /dev/nbdN through the kernel's NBD client
// (hostdev/nbd) or /dev/ublkbN through ublk (hostdev/ublk). The process
// keeps a state file per device in RUN-DIR/blockdevs; detach finds it
// there, asks the kernel to take the device down and waits for the
// process to clean up, which logs out after its last device.

// blockKind is one of the kernel block device drivers attach can use.
type blockKind struct {
	flag   string // --nbd, --ublk
	module string // the kernel module that provides it
	node   string // what exists when it is loaded
	name   *regexp.Regexp
	// available says why the kernel cannot serve the kind, or nil.
	available func() error
	// attach exposes a LUN; recover serves dev, whose process died,
	// again; stop takes a device down from any process; remove takes
	// down one whose process died.
	attach  func(ctx context.Context, s *initiator.Session, d *remote.Disk, inFlight int, backend string, l *log.Entry) (blockDevice, error)
	recover func(ctx context.Context, dev string, s *initiator.Session, d *remote.Disk, inFlight int, backend string, l *log.Entry) (blockDevice, error)
	stop    func(dev string) error
	remove  func(dev string) error
}

// devIndex is the number at the end of a device's name.
func devIndex(dev string) int {
	name := filepath.Base(dev)
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(name[i:])
	return n
}

// blockDevice is a LUN exposed as a block device by this process.
type blockDevice interface {
	Path() string
	Done() <-chan struct{}
	Err() error
	// Disconnect takes the device down and waits until it is.
	Disconnect(timeout time.Duration) error
}

var blockKinds = map[string]*blockKind{
	"nbd": {
		flag: "--nbd", module: "nbd", node: "/dev/nbd0",
		name:      regexp.MustCompile(`^nbd([0-9]+)$`),
		available: nbd.Available,
		attach: func(ctx context.Context, s *initiator.Session, d *remote.Disk, inFlight int, backend string, l *log.Entry) (blockDevice, error) {
			dev, err := nbd.Attach(ctx, nbd.NewLUN(s, d), nbd.Options{Index: -1, InFlight: inFlight, Backend: backend, Log: l})
			if err != nil {
				return nil, err
			}
			return nbdDevice{dev}, nil
		},
		recover: func(ctx context.Context, dev string, s *initiator.Session, d *remote.Disk, inFlight int, backend string, l *log.Entry) (blockDevice, error) {
			nd, err := nbd.Reattach(ctx, devIndex(dev), nbd.NewLUN(s, d), nbd.Options{InFlight: inFlight, Backend: backend, Log: l})
			if err != nil {
				return nil, err
			}
			return nbdDevice{nd}, nil
		},
		stop:   func(dev string) error { return nbd.Disconnect(devIndex(dev)) },
		remove: func(dev string) error { return nbd.Disconnect(devIndex(dev)) },
	},
	"ublk": {
		flag: "--ublk", module: "ublk_drv", node: ublk.ControlPath,
		name:      regexp.MustCompile(`^ublkb([0-9]+)$`),
		available: ublk.Available,
		attach: func(ctx context.Context, s *initiator.Session, d *remote.Disk, inFlight int, _ string, l *log.Entry) (blockDevice, error) {
			dev, err := ublk.Attach(ctx, nbd.NewLUN(s, d), ublk.Options{QueueDepth: inFlight, Recovery: true, Log: l})
			if err != nil {
				return nil, err
			}
			return ublkDevice{dev}, nil
		},
		recover: func(ctx context.Context, dev string, s *initiator.Session, d *remote.Disk, inFlight int, _ string, l *log.Entry) (blockDevice, error) {
			ud, err := ublk.Recover(ctx, devIndex(dev), nbd.NewLUN(s, d), ublk.Options{QueueDepth: inFlight, Log: l})
			if err != nil {
				return nil, err
			}
			return ublkDevice{ud}, nil
		},
		stop:   func(dev string) error { return ublk.Stop(devIndex(dev)) },
		remove: func(dev string) error { return ublk.Remove(devIndex(dev)) },
	},
}

type nbdDevice struct{ *nbd.Device }

type ublkDevice struct{ *ublk.Device }

func (d ublkDevice) Path() string { return d.Device.Path }

func (d nbdDevice) Path() string { return d.Device.Path }

// kindOf returns the kind of a device path that attach makes, or nil.
func kindOf(dev string) *blockKind {
	for _, k := range blockKinds {
		if k.name.MatchString(filepath.Base(dev)) {
			return k
		}
	}
	return nil
}

// unavailable says why kind cannot be used here, or nil.
func (k *blockKind) unavailable() error {
	if k.available == nil {
		return mount.Unavailable(k.module, k.node)
	}
	if _, err := os.Stat(k.node); err != nil {
		return mount.Unavailable(k.module, k.node)
	}
	if err := k.available(); err != nil {
		return fmt.Errorf("%s: %v", k.module, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s devices need root", k.module)
	}
	return nil
}

// blockState is a device's state file.
type blockState struct {
	PID       int    `json:"pid"`
	Device    string `json:"device"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	Portal    string `json:"portal"`
	LUN       uint16 `json:"lun"`
	Size      int64  `json:"size"`
	BlockSize int    `json:"block_size"`
	ReadOnly  bool   `json:"read_only,omitempty"`
	Log       string `json:"log,omitempty"`
}

func blockStatePath(runDir, dev string) string {
	return filepath.Join(runDir, "blockdevs", filepath.Base(dev)+".json")
}

func readBlockState(path string) (blockState, error) {
	var st blockState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// attachBlock starts the daemon that serves the LUNs as kind's devices,
// waits for it to report them, and prints them.
func attachBlock(kind string, c *common, m *mountFlags, args []string, portal string, stdout, stderr io.Writer) int {
	target, err := c.targetName()
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitUsage
	}
	if m.logFile == "" {
		m.logFile = filepath.Join(m.runDir, fmt.Sprintf("%s-%s-%d.log", kind, mountID(target), time.Now().UnixNano()))
	}
	flags := withoutFlags(args, "nbd", "ublk", "log-file", "run-dir", "foreground")
	child := append([]string{"attach", "--" + kind, "--foreground"}, flags...)
	child = append(child, "--log-file", m.logFile, "--run-dir", m.runDir, portal)
	info, err := mount.Spawn(m.runDir, m.logFile, child)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	for _, f := range info.Files {
		fmt.Fprintln(stdout, f.Path)
	}
	return exitOK
}

// mountID makes a name usable in a file name.
func mountID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// serveBlock logs in and serves every selected LUN as one of kind's
// devices until each is taken down (detach) or a signal takes down those
// that nothing uses; then it logs out.
func serveBlock(ctx context.Context, kind string, c *common, m *mountFlags, portal, recoverDev string, stdout, stderr io.Writer) int {
	k := blockKinds[kind]
	ready := mount.ReadyReporter()
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "ddpinitiator attach: %s\n", msg)
		ready.Report(mount.Info{Error: msg})
		return exitFailed
	}
	target, err := c.targetName()
	if err != nil {
		return fail("%v", err)
	}
	c.verbose = true
	depth := c.cfg.QueueDepth
	mc := mount.Config{Slots: depth, MaxWrite: int(c.cfg.Mount.MaxWrite)}
	s, rdev, err := c.dial(ctx, portal, target, initiator.Config{Buffers: mc.Buffers()}, stderr)
	if err != nil {
		return fail("login to %s at %s: %v", target, portal, err)
	}
	defer rdev.Close()
	defer s.Close()
	l := log.NewEntry(log.StandardLogger())
	slots, err := remote.NewSlots(s, depth, mc.MaxWrite+8192)
	if err != nil {
		return fail("%v", err)
	}
	defer slots.Close()
	luns, err := remote.ReportLUNs(ctx, s)
	if err != nil {
		return fail("REPORT LUNS: %v", err)
	}
	if t, err := c.cfg.FindTarget(target); err == nil && len(t.LUNs) > 0 {
		has := map[uint16]bool{}
		for _, n := range luns {
			has[n] = true
		}
		luns = luns[:0]
		for _, n := range t.LUNs {
			if !has[uint16(n)] {
				return fail("the configuration selects LUN %d, which %s does not report", n, target)
			}
			luns = append(luns, uint16(n))
		}
	}
	if len(luns) == 0 {
		return fail("%s reports no LUNs", target)
	}
	if recoverDev != "" {
		st, err := readBlockState(blockStatePath(m.runDir, recoverDev))
		if err != nil {
			return fail("recovering %s: %v", recoverDev, err)
		}
		luns = []uint16{st.LUN}
	}

	// Devices are served on a context of their own: a signal asks for
	// their removal, it does not cut them off.
	serveCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type served struct {
		dev   blockDevice
		state string
	}
	var devs []served
	info := mount.Info{PID: os.Getpid(), Target: target, Portal: portal, Log: m.logFile}
	takeDown := func() {
		for _, d := range devs {
			d.dev.Disconnect(10 * time.Second)
			os.Remove(d.state)
		}
	}
	for _, n := range luns {
		d, err := remote.Open(ctx, s, n, slots)
		if err != nil {
			takeDown()
			return fail("%v", err)
		}
		var dev blockDevice
		if recoverDev != "" {
			dev, err = k.recover(serveCtx, recoverDev, s, d, depth, fmt.Sprintf("%s/lun%d", target, n), l)
		} else {
			dev, err = k.attach(serveCtx, s, d, depth, fmt.Sprintf("%s/lun%d", target, n), l)
		}
		if err != nil {
			takeDown()
			return fail("LUN %d: %v", n, err)
		}
		st := blockState{PID: os.Getpid(), Device: dev.Path(), Kind: kind, Target: target, Portal: portal, LUN: n,
			Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly(), Log: m.logFile}
		path := blockStatePath(m.runDir, dev.Path())
		if err := writeJSON(path, st); err != nil {
			log.Warnf("state of %s: %v (detach will not find it)", dev.Path(), err)
		}
		devs = append(devs, served{dev, path})
		info.Files = append(info.Files, mount.File{Name: filepath.Base(dev.Path()), Path: dev.Path(), LUN: n, Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly()})
		log.Infof("LUN %d of %s (%s, %d-octet blocks) is %s", n, target, hostdev.HumanSize(d.Size()), d.BlockSize(), dev.Path())
	}
	if ready == nil {
		for _, f := range info.Files {
			fmt.Fprintln(stdout, f.Path)
		}
	}
	ready.Report(info)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ended := s.Done()
	left := len(devs)
	done := make(chan int, len(devs))
	for i, d := range devs {
		go func() {
			<-d.dev.Done()
			done <- i
		}()
	}
	for left > 0 {
		select {
		case i := <-done:
			left--
			d := devs[i]
			os.Remove(d.state)
			if err := d.dev.Err(); err != nil {
				log.Errorf("%s: %v", d.dev.Path(), err)
			} else {
				log.Infof("%s detached", d.dev.Path())
			}
		case <-sigs:
			for _, d := range devs {
				select {
				case <-d.dev.Done():
					continue
				default:
				}
				if err := inUse(d.dev.Path()); err != nil {
					log.Errorf("not detaching %s: %v; still serving", d.dev.Path(), err)
					continue
				}
				go d.dev.Disconnect(30 * time.Second)
			}
		case <-ended:
			ended = nil
			log.Errorf("the session ended: %v; I/O on the devices fails until they are detached", s.Err())
		}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	switch err := s.Logout(lctx); {
	case errors.Is(err, initiator.ErrReconnecting):
		log.Infof("the target is unreachable: no logout")
	case err != nil && s.Err() == nil:
		log.Warnf("logout: %v", err)
	default:
		log.Infof("logged out")
	}
	return exitOK
}

// inUse says whether a block device is mounted or held open exclusively:
// an exclusive open of it fails then.
func inUse(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%s is in use (mounted, or held open exclusively): unmount it first", dev)
	}
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// detachBlock takes down a device that attach --nbd or --ublk made:
// refused while it is in use; otherwise the kernel is asked to remove it
// and the serving process, once it has cleaned up, logs out after its
// last device.
func detachBlock(k *blockKind, runDir, dev string, stdout io.Writer) error {
	state := blockStatePath(runDir, dev)
	st, err := readBlockState(state)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s was not attached by ddpinitiator attach %s (no %s; see --run-dir)", dev, k.flag, state)
		}
		return err
	}
	if err := inUse(dev); err != nil {
		return err
	}
	if !mount.Alive(st.PID) {
		// Nobody serves it: "attach --recover" could have; it goes
		// now, and I/O the kernel held for a recovery fails.
		if err := k.remove(dev); err != nil {
			return err
		}
		os.Remove(state)
		fmt.Fprintf(stdout, "detached %s (its process, pid %d, had died)\n", dev, st.PID)
		return nil
	}
	if err := k.stop(dev); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(state); errors.Is(err, os.ErrNotExist) {
			break
		}
		if !mount.Alive(st.PID) {
			os.Remove(state)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: its process (pid %d) has not taken it down after 30 s", dev, st.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(stdout, "detached %s\n", dev)
	if others := blockDevsOf(runDir, st.PID); len(others) > 0 {
		fmt.Fprintf(stdout, "pid %d still serves %s\n", st.PID, strings.Join(others, ", "))
		return nil
	}
	for mount.Alive(st.PID) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the process that served %s (pid %d) has not exited after 30 s", dev, st.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(stdout, "logged out of %s\n", st.Target)
	return nil
}

// blockDevsOf lists the devices whose state names process pid.
func blockDevsOf(runDir string, pid int) []string {
	var out []string
	for _, st := range listBlockStates(runDir) {
		if st.PID == pid {
			out = append(out, st.Device)
		}
	}
	return out
}

func listBlockStates(runDir string) []blockState {
	paths, _ := filepath.Glob(filepath.Join(runDir, "blockdevs", "*.json"))
	var out []blockState
	for _, p := range paths {
		if st, err := readBlockState(p); err == nil {
			out = append(out, st)
		}
	}
	return out
}
