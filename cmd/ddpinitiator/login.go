package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/hostdev/session"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

func loginCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, "usage: ddpinitiator login [flags] [PORTAL]\n\nLogs in to --target at PORTAL, prints the negotiated session and the\nLUNs with their sizes, and logs out. Exit 0 means the target is usable.\n\n")
	if !ok {
		return code
	}
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return failf(stderr, exitUsage, "ddpinitiator: %v", err)
	}
	s, dev, err := c.dial(ctx, portal, target, initiator.Config{Buffers: 1 << 20, QueueDepth: 8}, stderr)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: %s", loginFailure(target, portal, 1<<20, err))
	}
	defer dev.Close()
	defer s.Close()
	if err := remote.Report(ctx, s, portal, stdout); err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: %v", err)
	}
	if err := s.Logout(ctx); err != nil {
		return failf(stderr, exitFailed, "ddpinitiator: logout: %v", err)
	}
	fmt.Fprintln(stdout, "logged out")
	return exitOK
}
