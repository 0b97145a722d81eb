package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/lunfs"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/hanwen/go-fuse/v2/fuse"
	log "github.com/sirupsen/logrus"
)

const mountHelp = `usage: ddpinitiator mount [flags] [PORTAL] MOUNTPOINT

Logs in to --target at PORTAL and mounts its LUNs at MOUNTPOINT as a FUSE
filesystem: one file per LUN (lun0, lun1, ...) sized to it, for fio,
losetup, mkfs and mount. Reads and writes become SCSI READ and WRITE,
fsync becomes SYNCHRONIZE CACHE; with mount.direct_io (the default) there
is no page cache in between, so a write has reached the target when it
returns. A lost connection is recovered for up to recovery_timeout; I/O
waits meanwhile.

Runs in the foreground, logging to stderr, until SIGINT/SIGTERM or
"ddpinitiator umount MOUNTPOINT"; with --daemon it returns once the mount
is ready and serves in the background (log in --log-file). Needs root
(the mount is made directly, without fusermount).

`

// mountFlags are the flags of mount (and attach, which passes them on).
type mountFlags struct {
	daemon  bool
	runDir  string
	logFile string
}

func (m *mountFlags) register(fs *flag.FlagSet, daemon bool) {
	if daemon {
		fs.BoolVar(&m.daemon, "daemon", false, "serve in the background once mounted")
	}
	fs.StringVar(&m.runDir, "run-dir", defaultRunDir(), "where mounts keep their state and daemon logs")
	fs.StringVar(&m.logFile, "log-file", "", "the daemon's log (default: RUN-DIR/NAME.log)")
}

// defaultRunDir is /run/ddpinitiator for root, else under the user's
// runtime or temporary directory.
func defaultRunDir() string {
	if os.Geteuid() == 0 {
		return "/run/ddpinitiator"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ddpinitiator")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ddpinitiator-%d", os.Getuid()))
}

// readyFD is the environment variable that tells a daemon child which
// descriptor to report its mount (or failure) on.
const readyFD = "DDPINITIATOR_READY_FD"

// mountInfo describes a mount: written to its state file, and reported
// by a daemon child to the parent that waits for it.
type mountInfo struct {
	PID        int        `json:"pid"`
	Mountpoint string     `json:"mountpoint"`
	Target     string     `json:"target"`
	Portal     string     `json:"portal"`
	Log        string     `json:"log,omitempty"`
	Files      []lunFile  `json:"files"`
	Error      string     `json:"error,omitempty"`
	Loops      []loopInfo `json:"loops,omitempty"`
}

type lunFile struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	LUN       uint16 `json:"lun"`
	Size      int64  `json:"size"`
	BlockSize int    `json:"block_size"`
	ReadOnly  bool   `json:"read_only,omitempty"`
}

type loopInfo struct {
	Device   string `json:"device"`
	File     string `json:"file"`
	DirectIO bool   `json:"direct_io"`
}

func mountCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mount", flag.ContinueOnError)
	var c common
	var m mountFlags
	c.register(fs, true)
	m.register(fs, true)
	portal, rest, code, ok := parse(fs, &c, args, stdout, stderr, mountHelp, "MOUNTPOINT")
	if !ok {
		return code
	}
	dir, err := filepath.Abs(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator mount: %v\n", err)
		return exitUsage
	}
	if err := checkMountpoint(dir); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator mount: %v\n", err)
		return exitUsage
	}
	if m.daemon {
		info, err := spawn(withoutFlags(args[:len(args)-fs.NArg()], "daemon", "log-file", "run-dir"), portal, &m, dir)
		if err != nil {
			fmt.Fprintf(stderr, "ddpinitiator mount: %v\n", err)
			return exitFailed
		}
		printMounted(stdout, info)
		fmt.Fprintf(stdout, "serving in the background as pid %d, log in %s\n", info.PID, info.Log)
		return exitOK
	}
	return serveMount(ctx, &c, &m, portal, dir, stdout, stderr)
}

// checkMountpoint refuses what cannot be mounted on.
func checkMountpoint(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	if mi, ok, _ := findMount(dir); ok && mi.fstype == fsType {
		return fmt.Errorf("%s is already a ddpinitiator mount (of %s)", dir, mi.source)
	}
	if os.Geteuid() != 0 {
		return errors.New("mounting needs root (FUSE is mounted directly, without fusermount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("this kernel has no FUSE: %w", err)
	}
	return nil
}

// serveMount logs in, mounts, and serves until a signal or an unmount.
func serveMount(ctx context.Context, c *common, m *mountFlags, portal, dir string, stdout, stderr io.Writer) int {
	ready := readyReporter()
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "ddpinitiator mount: %s\n", msg)
		ready(mountInfo{Error: msg})
		return exitFailed
	}
	target, err := c.targetName()
	if err != nil {
		return fail("%v", err)
	}
	c.verbose = true
	mo := c.cfg.Mount
	nslots := c.cfg.QueueDepth
	slotSize := int(mo.MaxWrite) + 8192 // a whole MaxWrite at any offset of 4 KiB blocks
	// the slots, and 1 MiB for REPORT LUNS and the like
	s, dev, err := c.dial(ctx, portal, target, initiator.Config{Buffers: nslots*slotSize + 1<<20}, stderr)
	if err != nil {
		return fail("login to %s at %s: %v", target, portal, err)
	}
	defer dev.Close()
	defer s.Close()
	slots, err := remote.NewSlots(s, nslots, slotSize)
	if err != nil {
		return fail("%v", err)
	}
	defer slots.Close()
	disks, err := openDisks(ctx, c, target, s, slots)
	if err != nil {
		return fail("%v", err)
	}
	fsys := lunfs.New(disks, nslots, lunfs.Options{DirectIO: mo.DirectIO, MaxWrite: int(mo.MaxWrite), AllowOther: mo.AllowOther, Name: target, Debug: c.debug})
	srv, err := fsys.Mount(dir)
	if err != nil {
		return fail("mount on %s: %v", dir, err)
	}
	info := mountInfo{PID: os.Getpid(), Mountpoint: dir, Target: target, Portal: portal, Log: m.logFile}
	for _, d := range disks {
		name := fmt.Sprintf("lun%d", d.LUN())
		info.Files = append(info.Files, lunFile{Name: name, Path: filepath.Join(dir, name), LUN: d.LUN(), Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly()})
	}
	state := statePath(m.runDir, dir)
	if err := writeState(state, info); err != nil {
		log.Warnf("mount state: %v (umount will not wait for the logout)", err)
	}
	defer os.Remove(state)
	if os.Getenv(readyFD) == "" {
		printMounted(stdout, info)
	}
	ready(info)

	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ended := s.Done()
	for {
		select {
		case <-sigs:
			unmountOnSignal(srv, dir)
			continue
		case <-ended:
			ended = nil
			log.Errorf("the session ended: %v; I/O on %s fails until it is unmounted", s.Err(), dir)
			continue
		case <-served:
		}
		break
	}
	log.Infof("unmounted %s", dir)
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch err := s.Logout(lctx); {
	case errors.Is(err, initiator.ErrReconnecting):
		log.Infof("the target is unreachable: no logout")
	case err != nil && s.Err() == nil:
		log.Warnf("logout: %v", err)
	}
	return exitOK
}

// unmountOnSignal unmounts, or says why it cannot and serves on: a busy
// mount still has users whose data must not be cut off.
func unmountOnSignal(srv *fuse.Server, dir string) {
	if err := srv.Unmount(); err != nil {
		log.Errorf("cannot unmount %s: %v: files are open on it or a loop device is attached (ddpinitiator detach); still serving", dir, err)
	}
}

// openDisks opens the LUNs of the target that the configuration selects
// (all it reports when it names none).
func openDisks(ctx context.Context, c *common, target string, s *initiator.Session, slots *remote.Slots) ([]*remote.Disk, error) {
	luns, err := remote.ReportLUNs(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("REPORT LUNS: %w", err)
	}
	if t, err := c.cfg.FindTarget(target); err == nil && len(t.LUNs) > 0 {
		reported := map[uint16]bool{}
		for _, n := range luns {
			reported[n] = true
		}
		luns = luns[:0]
		for _, n := range t.LUNs {
			if !reported[uint16(n)] {
				return nil, fmt.Errorf("the configuration selects LUN %d, which %s does not report", n, target)
			}
			luns = append(luns, uint16(n))
		}
	}
	if len(luns) == 0 {
		return nil, fmt.Errorf("%s reports no LUNs", target)
	}
	var disks []*remote.Disk
	for _, n := range luns {
		d, err := remote.Open(ctx, s, n, slots)
		if err != nil {
			return nil, err
		}
		disks = append(disks, d)
	}
	return disks, nil
}

func printMounted(w io.Writer, info mountInfo) {
	fmt.Fprintf(w, "mounted %s at %s on %s:\n", info.Target, info.Portal, info.Mountpoint)
	for _, f := range info.Files {
		ro := ""
		if f.ReadOnly {
			ro = ", read-only"
		}
		fmt.Fprintf(w, "  %s  %s (%d-octet blocks%s)\n", f.Path, human(f.Size), f.BlockSize, ro)
	}
}

// readyReporter returns the function a daemon child reports its mount or
// failure with (once); a no-op in the foreground.
func readyReporter() func(mountInfo) {
	fd := os.Getenv(readyFD)
	if fd == "" {
		return func(mountInfo) {}
	}
	f := os.NewFile(3, "ready")
	done := false
	return func(info mountInfo) {
		if done || f == nil {
			return
		}
		done = true
		json.NewEncoder(f).Encode(info)
		f.Close()
	}
}
