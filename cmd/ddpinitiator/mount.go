package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/session"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/metrics"
	"github.com/ddpstore/ddpstore/transport/initiator"
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
(the mount is made directly, without fusermount). In the foreground under
systemd it sends READY=1 once mounted (dist/systemd/ddpinitiator-mount@.service);
metrics.listen (--metrics-listen) serves Prometheus metrics of the session.

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
	fs.StringVar(&m.runDir, "run-dir", mount.DefaultRunDir(), "where mounts keep their state and daemon logs")
	fs.StringVar(&m.logFile, "log-file", "", "the daemon's log (default: RUN-DIR/NAME.log)")
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
		return failf(stderr, exitUsage, "ddpinitiator mount: %v", err)
	}
	if err := mount.CheckMountpoint(dir); err != nil {
		return failf(stderr, exitUsage, "ddpinitiator mount: %v", err)
	}
	if m.daemon {
		info, err := spawn(mount.DropFlags(fs, args[:len(args)-fs.NArg()], "daemon", "log-file", "run-dir"), portal, &m, dir)
		if err != nil {
			return failf(stderr, exitFailed, "ddpinitiator mount: %v", err)
		}
		mount.PrintMounted(stdout, info)
		fmt.Fprintf(stdout, "serving in the background as pid %d, log in %s\n", info.PID, info.Log)
		return exitOK
	}
	return serveMount(ctx, &c, &m, portal, dir, stdout, stderr)
}

// spawn runs "ddpinitiator mount FLAGS PORTAL DIR" as a daemon and waits
// for it to report its mount or its failure.
func spawn(flags []string, portal string, m *mountFlags, dir string) (mount.Info, error) {
	if m.logFile == "" {
		m.logFile = mount.LogPath(m.runDir, dir)
	}
	args := append([]string{"mount"}, flags...)
	args = append(args, "--log-file", m.logFile, "--run-dir", m.runDir, portal, dir)
	return mount.Spawn(m.runDir, m.logFile, args)
}

// serveMount logs in, mounts, and serves until a signal or an unmount.
func serveMount(ctx context.Context, c *common, m *mountFlags, portal, dir string, stdout, stderr io.Writer) int {
	ready := mount.ReadyReporter()
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return endServing(ready, stderr, "mount", err)
	}
	mo := c.cfg.Mount
	mc := mount.Config{Dir: dir, Target: target, Portal: portal, RunDir: m.runDir, LogFile: m.logFile, Slots: c.cfg.QueueDepth,
		MaxWrite: int(mo.MaxWrite), DirectIO: mo.DirectIO, AllowOther: mo.AllowOther, IOURing: mo.IOURing, Debug: c.debug, LUNs: session.TargetLUNs(c.cfg, target)}
	icfg := initiator.Config{Buffers: mc.Buffers()}
	// The receiver does not spin between messages: while it spins its
	// processor does not poll for the mount's next request (/dev/fuse
	// waits in the same poller), and the CPU it takes is the one the
	// program doing the I/O needs. Pinned with fio to one CPU, the mount's
	// 4 KiB QD1 I/Os went from 5.2K to 8.2K a second without the spin.
	// It spins only for the answer to a command that is the only one
	// outstanding (iwarp.ConnConfig.ReadSpinAwaitedOnly): the program is
	// then blocked on that answer, and the spin saves the sleep and the
	// wake-up (docs/performance.md, ninth session).
	icfg.Conn.ReadSpin, icfg.Conn.ReadSpinAwaitedOnly = iwarp.DefaultReadSpin, true
	return c.serve(ctx, "mount", false, portal, target, icfg, mc.LUNs, ready, stderr, func(s *initiator.Session, sigs <-chan os.Signal) error {
		return mount.Serve(ctx, s, mc, stdout, sigs, ready)
	})
}

// serve is the serving process of command cmd (mount, attach): it logs in
// to portal as a long-running process and runs serve on the session, with
// SIGINT and SIGTERM on sigs, until it returns. A failure is printed and
// reported to ready before the session is closed. With metrics.listen
// configured it serves the session's metrics (luns: the LUNs to show from
// the start; nil: as they are used) and its RNIC's.
func (c *common) serve(ctx context.Context, cmd string, blocking bool, portal, target string, icfg initiator.Config, luns []uint16, ready *mount.Reporter, stderr io.Writer, serve func(s *initiator.Session, sigs <-chan os.Signal) error) int {
	c.verbose = true
	if blocking {
		hostdev.BlockingProcs()
	}
	var m *metrics.Initiator
	if addr := c.cfg.Metrics.Listen; addr != "" {
		m = metrics.NewInitiator()
		obs := m.Session(target)
		for _, n := range luns {
			obs.AddLUN(n)
		}
		icfg.Observer = obs
		msrv, err := metrics.Listen(addr, m.Registry)
		if err != nil {
			return endServing(ready, stderr, cmd, err)
		}
		defer msrv.Close()
		log.Infof("metrics on http://%s/metrics", msrv.Addr())
	}
	s, dev, err := c.dial(ctx, portal, target, icfg, stderr)
	if err != nil {
		return endServing(ready, stderr, cmd, errors.New(loginFailure(target, portal, icfg.Buffers, err)))
	}
	defer dev.Close()
	defer s.Close()
	if m != nil && dev != nil {
		m.RNIC.Set(dev.Counters)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return endServing(ready, stderr, cmd, serve(s, sigs))
}

// endServing ends the serving process of command cmd: exitOK when err is nil,
// else exitFailed once err is printed and reported to a spawning parent.
func endServing(ready *mount.Reporter, stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return exitOK
	}
	ready.Fail(stderr, "ddpinitiator "+cmd, err)
	return exitFailed
}
