// Command ddpinitiator uses disks that ddptarget exports, over iSER on
// ddpstore's software RNIC.
//
//	ddpinitiator discover PORTAL            list the targets a portal offers
//	ddpinitiator login [flags] PORTAL       log in, report the session and its LUNs, log out
//	ddpinitiator bench [flags] PORTAL       measure I/O in-process (no FUSE)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

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

PORTAL is host:port (default port 3260). Run "ddpinitiator COMMAND --help"
for a command's flags.

Exit status: 0 success, 1 the target failed us (unreachable, login refused,
I/O error), 2 bad command line, 3 bench --verify found wrong data.
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
		return bench(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ddpinitiator: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// common are the flags every command that logs in takes.
type common struct {
	name     string
	target   string
	user     string
	secret   string
	debug    bool
	recovery time.Duration
}

func (c *common) register(fs *flag.FlagSet, needTarget bool) {
	fs.StringVar(&c.name, "initiator-name", "iqn.2026-11.io.ddpstore:initiator", "this initiator's iSCSI name")
	if needTarget {
		fs.StringVar(&c.target, "target", "iqn.2026-11.io.ddpstore:default", "the target's iSCSI name")
	}
	fs.StringVar(&c.user, "chap-user", "", "CHAP user name (with --chap-secret)")
	fs.StringVar(&c.secret, "chap-secret", "", "CHAP secret (at least 12 octets)")
	fs.BoolVar(&c.debug, "debug", false, "log the protocol's progress to stderr")
	fs.DurationVar(&c.recovery, "recovery-timeout", 30*time.Second, "how long I/O waits through a lost connection (reconnect, re-login, reissue) before failing; 0: fail at once")
}

// parse parses a command's flags and its one PORTAL argument.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help string) (portal string, code int, ok bool) {
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
			return "", exitOK, false
		}
		return "", exitUsage, false
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "ddpinitiator: want one PORTAL argument, got %d\n\n", fs.NArg())
		fs.Usage()
		return "", exitUsage, false
	}
	return withPort(fs.Arg(0)), 0, true
}

// withPort adds the iSCSI port 3260 to a portal given without one.
func withPort(p string) string {
	if _, _, err := splitHostPort(p); err == nil {
		return p
	}
	return joinHostPort(p, "3260")
}

// dial logs in to portal; target "" makes a discovery session.
func (c *common) dial(ctx context.Context, portal, target string, cfg initiator.Config, stderr io.Writer) (*initiator.Session, *iwarp.Device, error) {
	l := log.New()
	l.SetOutput(stderr)
	l.SetLevel(log.WarnLevel)
	if c.debug {
		l.SetLevel(log.DebugLevel)
	}
	log.SetOutput(stderr) // gotgt and others log through the standard logger
	cfg.InitiatorName, cfg.TargetName, cfg.Log = c.name, target, log.NewEntry(l)
	if target != "" {
		cfg.RecoveryTimeout = c.recovery
	}
	if c.user != "" || c.secret != "" {
		cfg.CHAP = chapOf(c.user, c.secret)
	}
	dev := iwarp.NewDevice(0)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(dctx, dev, "tcp", portal, cfg)
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	return s, dev, nil
}

func discover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	portal, code, ok := parse(fs, args, stdout, stderr, "usage: ddpinitiator discover [flags] PORTAL\n\nLists the targets PORTAL offers (iSCSI SendTargets=All).\n\n")
	if !ok {
		return code
	}
	s, dev, err := c.dial(ctx, portal, "", initiator.Config{Buffers: 1 << 20, QueueDepth: 4}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: discover %s: %v\n", portal, err)
		return exitFailed
	}
	defer dev.Close()
	defer s.Close()
	ts, err := s.SendTargets(ctx, "All")
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: SendTargets on %s: %v\n", portal, err)
		return exitFailed
	}
	for _, t := range ts {
		fmt.Fprintln(stdout, t.Name)
		for _, p := range t.Portals {
			fmt.Fprintf(stdout, "  %s,%d\n", p.Addr, p.TPGT)
		}
	}
	return exitOK
}
