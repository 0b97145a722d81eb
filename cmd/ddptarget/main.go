// Command ddptarget exports disks over iSER on ddpstore's software RNIC.
//
//	ddptarget [--config FILE]          run the target daemon
//	ddptarget --check [--config FILE]  validate and print the effective config
//	ddptarget status [--json]          what a running daemon serves (its control socket)
//
// Without --config it serves the embedded default: one 1 GiB memory LUN on
// 127.0.0.1:3260. SIGINT and SIGTERM shut down gracefully (in-flight
// commands finish, sessions close, stores are synced and unmapped); SIGHUP
// reloads LUNs, ACLs and CHAP from the config file without dropping the
// sessions the change does not touch. Under systemd (Type=notify) it sends
// READY=1 once every portal listens, and RELOADING=1 and STOPPING=1 around
// reloads and the shutdown.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the daemon could not start (a portal, a store) or failed while running
	exitUsage  = 2 // bad flags or a bad configuration
)

const usage = `usage: ddptarget [--config FILE] [--check]
       ddptarget status [--json] [--config FILE | --socket PATH]

ddptarget exports disks (files, block devices, memory) as iSCSI targets over
iSER, carried by ddpstore's software iWARP RNIC on TCP.

  --config FILE  the YAML configuration (see docs/config.md); without it the
                 embedded default serves one 1 GiB memory LUN as
                 iqn.2026-11.io.ddpstore:default on 127.0.0.1:3260
  --check        validate the configuration, print it with every default
                 filled in, and exit (0: valid, 2: invalid)
  --help         this text

"ddptarget status" asks the running daemon, over its control socket
(control.socket, default /run/ddpstore/ddptarget.sock), for its portals,
targets, LUNs, sessions and I/O counts; see "ddptarget status --help".

Signals: SIGINT/SIGTERM shut down gracefully; SIGHUP reloads LUNs, ACLs and
CHAP from FILE, keeping the sessions the change does not touch.

Exit status: 0 after a clean shutdown or a valid --check, 1 when the daemon
cannot start (a portal cannot listen, a store cannot be opened) or fails
while running, 2 for bad flags or a bad configuration.
`

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// run is the whole program, with its signals and output injectable for
// tests.
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if len(args) > 0 && args[0] == "status" {
		return statusCmd(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("ddptarget", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	path := fs.String("config", "", "")
	check := fs.Bool("check", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ddptarget: unexpected argument %q\n\n%s", fs.Arg(0), usage)
		return exitUsage
	}
	cfg, err := load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "ddptarget: %v\n", err)
		return exitUsage
	}
	if *check {
		out, err := cfg.Marshal()
		if err != nil {
			fmt.Fprintf(stderr, "ddptarget: %v\n", err)
			return exitFailed
		}
		stdout.Write(out)
		return exitOK
	}
	logger, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ddptarget: %v\n", err)
		return exitUsage
	}
	d, err := start(cfg, logger, *path)
	if err != nil {
		// One line, like a configuration error: the daemon never ran.
		fmt.Fprintf(stderr, "ddptarget: %v\n", err)
		return exitFailed
	}
	notify := func(state string) {
		if err := mount.Notify(state); err != nil {
			logger.Warnf("ddptarget: sd_notify %q: %v", state, err)
		}
	}
	// Every portal listens now: connections wait in the backlog until
	// their Serve loop takes them.
	notify(fmt.Sprintf("READY=1\nMAINPID=%d\nSTATUS=serving %d targets on %s", os.Getpid(), len(cfg.Targets), strings.Join(d.addrs, ", ")))
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if *path == "" {
					logger.Warn("ddptarget: SIGHUP ignored: running on the embedded default, no file to reload")
					continue
				}
				notify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
				next, err := config.LoadTarget(*path)
				if err == nil {
					err = d.reload(next)
				}
				if err != nil {
					logger.Errorf("ddptarget: reload of %s refused, still serving the previous config: %v", *path, err)
					notify("READY=1\nSTATUS=reload refused, serving the previous configuration")
				} else {
					logger.Infof("ddptarget: reloaded %s", *path)
					notify(fmt.Sprintf("READY=1\nSTATUS=serving %d targets on %s", len(next.Targets), strings.Join(d.addrs, ", ")))
				}
				continue
			}
			logger.Infof("ddptarget: %v: shutting down", sig)
			notify("STOPPING=1")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := d.shutdown(ctx)
			cancel()
			if err != nil {
				logger.Errorf("ddptarget: shutdown: %v", err)
				return exitFailed
			}
			logger.Info("ddptarget: stopped")
			return exitOK
		case err := <-d.failed:
			logger.Errorf("ddptarget: %v", err)
			notify("STOPPING=1")
			d.shutdown(context.Background())
			return exitFailed
		}
	}
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, which RELOADING=1
// carries (sd_notify(3)).
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Sec*1e6 + ts.Nsec/1e3
}

func load(path string) (*config.Target, error) {
	if path == "" {
		return config.DefaultTarget(), nil
	}
	return config.LoadTarget(path)
}

func newLogger(c config.Log, w io.Writer) (*log.Entry, error) {
	l := log.New()
	l.SetOutput(w)
	lvl, err := log.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.Level, err)
	}
	l.SetLevel(lvl)
	if c.Format == "json" {
		l.SetFormatter(&log.JSONFormatter{})
	} else {
		l.SetFormatter(&log.TextFormatter{FullTimestamp: true})
	}
	// gotgt logs through logrus's standard logger: keep its noise at our
	// level and in our stream.
	log.SetOutput(w)
	log.SetLevel(min(lvl, log.ErrorLevel))
	return log.NewEntry(l), nil
}
