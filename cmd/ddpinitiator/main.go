// Command ddpinitiator uses disks that ddptarget exports, over iSER on
// ddpstore's software RNIC.
//
//	ddpinitiator discover PORTAL            list the targets a portal offers
//	ddpinitiator login [flags] PORTAL       log in, report the session and its LUNs, log out
//	ddpinitiator bench [flags] PORTAL       measure I/O in-process (no FUSE)
//	ddpinitiator mount [flags] PORTAL DIR   mount the LUNs as files (FUSE)
//	ddpinitiator umount DIR                 unmount them and log out
//	ddpinitiator attach [flags] PORTAL      mount, and a loop device per LUN
//	ddpinitiator detach /dev/loopN          undo attach
//	ddpinitiator status                     list mounts and their sessions
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

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/hostdev/session"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the target could not be reached, refused us, or I/O failed
	exitUsage  = 2 // bad command line
	exitVerify = 3 // bench --verify found data that is not what was written
)

const usage = `usage: ddpinitiator COMMAND [flags] PORTAL

Commands:
  discover PORTAL   run a SendTargets discovery session and list the targets
                    and portals it reports
  login PORTAL      log in to a target, print the negotiated session and its
                    LUNs with their sizes, log out: a status check
  bench PORTAL      drive I/O against a LUN in-process and report IOPS,
                    bandwidth and latency (mean, p50, p99, p99.9)
  mount PORTAL DIR  mount the target's LUNs on DIR as files (lun0, ...) for
                    fio, losetup and mkfs; --daemon to serve in the background
  umount DIR        unmount a mount, wait for its logout
  attach PORTAL     mount in the background and attach a loop device to each
                    LUN's file; prints the /dev/loopN devices
  detach /dev/loopN detach a loop device from attach; unmounts when it was
                    the last one
  status            list the mounts and attachments this host serves, and
                    whether each one's process is alive

PORTAL is host:port (default port 3260); without it the target's first
portal in the configuration (--config FILE, see docs/config.md) is used.
Flags override the file. Run "ddpinitiator COMMAND --help" for a command's
flags.

Exit status: 0 success, 1 the target failed us (unreachable, login refused,
I/O error) or the mount could not be made or undone, 2 bad command line,
3 bench --verify found wrong data.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "discover":
		return discover(ctx, args[1:], stdout, stderr)
	case "login":
		return loginCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "mount":
		return mountCmd(ctx, args[1:], stdout, stderr)
	case "umount", "unmount":
		return umountCmd(ctx, args[1:], stdout, stderr)
	case "attach":
		return attachCmd(ctx, args[1:], stdout, stderr)
	case "detach":
		return detachCmd(ctx, args[1:], stdout, stderr)
	case "status":
		return statusCmd(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ddpinitiator: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// common are the flags every command takes: the configuration file, the
// flags that override it, and the target to use.
type common struct {
	path   string
	target string
	user   string
	secret string
	debug  bool
	// transport overrides the configured lower layer: tcp, sctp (kernel)
	// or sctp-udp.
	transport string
	// verbose keeps the configured log level (a long-running mount logs
	// reconnects); the other commands print their own results and log
	// only warnings.
	verbose bool
	apply   func(*config.Initiator) error
	cfg     *config.Initiator
}

func (c *common) register(fs *flag.FlagSet, needTarget bool) {
	fs.StringVar(&c.path, "config", "", "the initiator's YAML configuration (see docs/config.md); default: the embedded one")
	if needTarget {
		fs.StringVar(&c.target, "target", "", "the target's iSCSI name (default: the configuration's only target)")
	}
	fs.StringVar(&c.user, "chap-user", "", "CHAP user name (with --chap-secret), instead of the configuration's")
	fs.StringVar(&c.secret, "chap-secret", "", "CHAP secret (at least 12 octets)")
	fs.BoolVar(&c.debug, "debug", false, "log the protocol's progress to stderr")
	fs.Func("transport", "how to reach the target: iSER over tcp (MPA/TCP), sctp (kernel SCTP) or sctp-udp (SCTP over UDP), or iscsi-tcp (iSCSI without RDMA, to any iSCSI target); default: the configuration's, else tcp", func(v string) error {
		switch v {
		case config.TransportTCP, config.TransportSCTP, config.TransportSCTPUDP, config.TransportISCSITCP:
			c.transport = v
			return nil
		}
		return fmt.Errorf("want tcp, sctp, sctp-udp or iscsi-tcp, not %q", v)
	})
	c.apply = config.InitiatorFlags(fs)
}

// load reads the configuration and applies the flags to it.
func (c *common) load() error {
	var err error
	if c.path == "" {
		c.cfg = config.DefaultInitiator()
	} else if c.cfg, err = config.LoadInitiator(c.path); err != nil {
		return err
	}
	return c.apply(c.cfg)
}

// parse parses a command's flags, its PORTAL argument, which may be left
// out when the configuration names the target's portals, and the extra
// arguments named by extra, which must follow it.
func parse(fs *flag.FlagSet, c *common, args []string, stdout, stderr io.Writer, help string, extra ...string) (portal string, rest []string, code int, ok bool) {
	if code, ok := parseFlags(fs, args, stdout, stderr, help); !ok {
		return "", nil, code, false
	}
	if err := c.load(); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: %v\n", err)
		return "", nil, exitUsage, false
	}
	pos := fs.Args()
	switch n := len(pos) - len(extra); n {
	case 0:
		p, err := session.ConfiguredPortal(c.cfg, c.target)
		if err != nil {
			return "", nil, failf(stderr, exitUsage, "ddpinitiator: %v", err), false
		}
		return p, pos, 0, true
	case 1:
		return session.WithPort(pos[0]), pos[1:], 0, true
	}
	if len(pos) < len(extra) {
		fmt.Fprintf(stderr, "ddpinitiator: missing %s\n\n", strings.Join(extra[len(pos):], " "))
	} else {
		fmt.Fprintf(stderr, "ddpinitiator: want at most %d arguments ([PORTAL] %s), got %d\n\n", len(extra)+1, strings.Join(extra, " "), len(pos))
	}
	fs.Usage()
	return "", nil, exitUsage, false
}

// parseFlags parses a command's flags; --help prints help to stdout.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help string) (int, bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, help)
			fs.PrintDefaults()
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// dial logs in to portal; target "" makes a discovery session. cfg's
// zero fields are filled from the configuration.
func (c *common) dial(ctx context.Context, portal, target string, cfg initiator.Config, stderr io.Writer) (*initiator.Session, *iwarp.Device, error) {
	log.SetOutput(stderr) // others log through the standard logger
	var chap *config.CHAP
	if c.user != "" || c.secret != "" {
		chap = &config.CHAP{User: c.user, Secret: c.secret}
	}
	cfg.Log = session.Logger(stderr, c.cfg.Log, c.verbose, c.debug)
	cfg = session.Config(c.cfg, target, cfg, chap)
	return session.Dial(ctx, session.Network(c.cfg, portal, target, c.transport), portal, cfg)
}

func discover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, "usage: ddpinitiator discover [flags] [PORTAL]\n\nLists the targets PORTAL offers (iSCSI SendTargets=All).\n\n")
	if !ok {
		return code
	}
	s, dev, err := c.dial(ctx, portal, "", initiator.Config{Buffers: 1 << 20, QueueDepth: 4}, stderr)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: discover %s: %v", portal, err)
	}
	defer dev.Close()
	defer s.Close()
	ts, err := s.SendTargets(ctx, "All")
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: SendTargets on %s: %v", portal, err)
	}
	session.PrintTargets(stdout, ts)
	return exitOK
}

// loginFailure is the one line of a login that failed. The session maps
// its registered buffers before it dials, so when that is what failed (out
// of memory: a memory limit such as ulimit -v, or more than the machine
// has) no connection was made, and the line says so and what to change;
// anything else is the login's own error.
func loginFailure(target, portal string, buffers int, err error) string {
	if errors.Is(err, syscall.ENOMEM) {
		return fmt.Sprintf("out of memory for the registered buffers: %d MiB cannot be mapped (%v); "+
			"lower the I/O depth or size (bench --iodepth, --bs; queue_depth, mount.max_write) or raise this process's memory limit",
			(buffers+1<<20-1)>>20, syscall.ENOMEM)
	}
	return fmt.Sprintf("login to %s at %s: %v", target, portal, err)
}

// failf prints a failure, one line, on stderr and returns the exit code.
func failf(stderr io.Writer, code int, format string, a ...any) int {
	fmt.Fprintf(stderr, format+"\n", a...)
	return code
}
