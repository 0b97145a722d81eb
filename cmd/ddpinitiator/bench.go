package main

import (
	"context"
	"flag"
	"io"

	"github.com/ddpstore/ddpstore/hostdev/bench"
	"github.com/ddpstore/ddpstore/hostdev/session"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

const benchHelp = `usage: ddpinitiator bench [flags] [PORTAL]

Drives I/O against one LUN of --target over iSER (or iSCSI/TCP), in this process (no FUSE,
no kernel block layer), and reports IOPS, bandwidth and latency. On a
terminal a progress line is updated once a second.

With --verify every written block carries its LBA and a generation number,
and every read of a block written in this run is checked (read modes
first fill the region). Workers own disjoint blocks, so the check is exact.

`

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	var o bench.Options
	var asJSON bool
	o.Register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, benchHelp)
	if !ok {
		return code
	}
	if err := o.Check(); err != nil {
		return failf(stderr, exitUsage, "ddpinitiator bench: %v", err)
	}
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return failf(stderr, exitUsage, "ddpinitiator: %v", err)
	}
	s, dev, err := c.dial(ctx, portal, target, initiator.Config{QueueDepth: o.IODepth, Buffers: o.Buffers()}, stderr)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: %s", loginFailure(target, portal, o.Buffers(), err))
	}
	defer dev.Close()
	defer s.Close()
	run, err := bench.New(ctx, s, o)
	switch {
	case bench.IsUsage(err):
		return failf(stderr, exitUsage, "ddpinitiator bench: %v", err)
	case err != nil:
		return failf(stderr, exitFailed, "ddpinitiator: %v", err)
	}
	res, err := run.Run(ctx, stderr)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator bench: %v", err)
	}
	if asJSON {
		res.PrintJSON(stdout)
	} else {
		res.Print(stdout)
	}
	if res.VerifyErrors > 0 {
		return exitVerify
	}
	return exitOK
}
