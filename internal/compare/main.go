// Command compare measures ddpstore against a plain TCP block server on
// this machine, the way a user would try both: one tmpfs-backed image
// served by nbdkit (file plugin) and by ddptarget, driven in process (fio's
// nbd engine against nbdkit, `ddpinitiator bench` against ddptarget) and
// through a mount (fio libaio direct=1 on nbdfuse's file and on
// `ddpinitiator mount`'s). Every pattern runs on every system in turn,
// run after run, with the order rotated, so that a neighbour slowing the
// machine down slows all of them; it reports medians with min-max, the
// ratios ddpstore/peer, the CPU time each side spent per I/O, and the
// limits measured in the same run: plain TCP bandwidth (iperf3) and a TCP
// ping-pong of a command and a 4 KiB reply (the floor of a QD1 read).
//
// With --pin (the default on a machine of two or more CPUs) every server
// runs on CPU 0 and every client, FUSE daemons included, on CPU 1: two
// hosts, one core each, as a deployment has them. (Go sizes its scheduler
// to the CPUs it may use, so each Go program then runs one processor, as
// nbdkit's and fio's threads share one core.)
//
// Usage: go run ./internal/compare [flags]; `make compare` installs the
// peers and runs it as root. See docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

type options struct {
	bin       string
	runtime   time.Duration
	runs      int
	size      int64
	pin       bool
	out       string
	png       string
	nbdPort   int
	ddpPort   int
	iscsiPort int // ddptarget's iscsi-tcp portal
	tcpPort   int
	patterns  string
	mounts    bool
	rbd       bool
	rbdPort   int // the RBD LUN's ddptarget
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding ddptarget and ddpinitiator")
	flag.DurationVar(&o.runtime, "runtime", 8*time.Second, "length of each measurement")
	flag.IntVar(&o.runs, "runs", 3, "runs of every pattern on every system (medians need 3 or more)")
	size := flag.String("size", "1GiB", "size of the image both servers serve (tmpfs)")
	flag.BoolVar(&o.pin, "pin", runtime.NumCPU() >= 2, "servers on CPU 0, clients on CPU 1")
	flag.StringVar(&o.out, "out", "out/compare.md", "the report (Markdown)")
	flag.StringVar(&o.png, "png", "out/compare.png", "the ratio chart (PNG, by gnuplot); empty for none")
	flag.IntVar(&o.nbdPort, "nbd-port", 10899, "nbdkit's port on 127.0.0.1")
	flag.IntVar(&o.ddpPort, "ddp-port", 3299, "ddptarget's port on 127.0.0.1")
	flag.IntVar(&o.iscsiPort, "iscsi-port", 3298, "ddptarget's iSCSI/TCP (no iSER) port on 127.0.0.1, the same LU")
	flag.IntVar(&o.tcpPort, "tcp-port", 5299, "port of the TCP limit measurements")
	flag.StringVar(&o.patterns, "patterns", "all", "comma-separated pattern names, or all")
	flag.BoolVar(&o.mounts, "mounts", true, "also measure through FUSE mounts (root and /dev/fuse)")
	flag.BoolVar(&o.rbd, "rbd", true, "also measure an RBD LUN against the file LUN, on a single-node Ceph (memstore) started for the run")
	flag.IntVar(&o.rbdPort, "rbd-port", 3297, "the RBD LUN's ddptarget's port on 127.0.0.1")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: compare [flags]\n\nMeasures ddpstore against nbdkit on this machine, in process and through\nmounts, interleaved; see docs/performance.md.\n\n")
		flag.PrintDefaults()
	}
	if len(os.Args) > 1 && os.Args[1] == "pingpong" {
		os.Exit(pingpongMain(os.Args[2:]))
	}
	flag.Parse()
	var err error
	if o.size, err = parseSize(*size); err != nil {
		fmt.Fprintf(os.Stderr, "compare: --size: %v\n", err)
		os.Exit(2)
	}
	if o.runs < 1 || o.runtime < time.Second {
		fmt.Fprintln(os.Stderr, "compare: --runs must be at least 1 and --runtime at least 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &o); err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil && unit == "" {
		if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
			return 0, fmt.Errorf("%q is not a size like 1GiB", s)
		}
	}
	mult := map[string]int64{"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	if mult == 0 || n <= 0 {
		return 0, fmt.Errorf("%q is not a size like 1GiB", s)
	}
	return n * mult, nil
}
