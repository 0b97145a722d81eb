package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ddpstore/ddpstore/hostdev/attach"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/session"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// attach --nbd and --ublk (hostdev/attach): a process of its own logs in
// and serves each LUN as a kernel block device; detach takes one down.

// attachBlock starts the daemon that serves the LUNs as kind's devices,
// waits for it to report them, and prints them. flags are the command
// line's, without those the child is given here.
func attachBlock(k *attach.Kind, c *common, m *mountFlags, flags []string, portal string, stdout, stderr io.Writer) int {
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return failf(stderr, exitUsage, "ddpinitiator attach: %v", err)
	}
	if m.logFile == "" {
		m.logFile = attach.LogPath(m.runDir, k.Name, target)
	}
	child := append([]string{"attach", k.Flag, "--foreground"}, flags...)
	child = append(child, "--log-file", m.logFile, "--run-dir", m.runDir, portal)
	info, err := mount.Spawn(m.runDir, m.logFile, child)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	for _, f := range info.Files {
		fmt.Fprintln(stdout, f.Path)
	}
	return exitOK
}

// serveBlock logs in and serves every selected LUN as one of k's devices
// until each is taken down (detach) or a signal takes down those that
// nothing uses; then it logs out.
func serveBlock(ctx context.Context, k *attach.Kind, c *common, m *mountFlags, portal, recoverDev string, stdout, stderr io.Writer) int {
	ready := mount.ReadyReporter()
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return endServing(ready, stderr, "attach", err)
	}
	ac := attach.Config{Kind: k, Target: target, Portal: portal, RunDir: m.runDir, LogFile: m.logFile,
		Slots: c.cfg.QueueDepth, MaxWrite: int(c.cfg.Mount.MaxWrite), Recover: recoverDev, LUNs: session.TargetLUNs(c.cfg, target)}
	return c.serve(ctx, "attach", true, portal, target, initiator.Config{Buffers: ac.Buffers()}, ac.LUNs, ready, stderr, func(s *initiator.Session, sigs <-chan os.Signal) error {
		return attach.Serve(ctx, s, ac, stdout, sigs, ready)
	})
}
