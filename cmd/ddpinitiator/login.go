package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

func splitHostPort(p string) (string, string, error) { return net.SplitHostPort(p) }
func joinHostPort(h, p string) string                { return net.JoinHostPort(h, p) }

func loginCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	portal, code, ok := parse(fs, &c, args, stdout, stderr, "usage: ddpinitiator login [flags] [PORTAL]\n\nLogs in to --target at PORTAL, prints the negotiated session and the\nLUNs with their sizes, and logs out. Exit 0 means the target is usable.\n\n")
	if !ok {
		return code
	}
	target, err := c.targetName()
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: %v\n", err)
		return exitUsage
	}
	s, dev, err := c.dial(ctx, portal, target, initiator.Config{Buffers: 1 << 20, QueueDepth: 8}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: login to %s at %s: %v\n", target, portal, err)
		return exitFailed
	}
	defer dev.Close()
	defer s.Close()
	r, p := s.Result(), s.Params()
	fmt.Fprintf(stdout, "target %s at %s: logged in (ISID %012x, TSIH %d)\n", r.TargetName, portal, r.ISID, r.TSIH)
	fmt.Fprintf(stdout, "  ImmediateData=%v FirstBurstLength=%d MaxBurstLength=%d TargetRecvDataSegmentLength=%d MaxCmdSN-CmdSN=%d\n",
		p.ImmediateData, p.FirstBurstLength, p.MaxBurstLength, p.TargetRecvDataSegmentLength, r.MaxCmdSN-r.CmdSN+1)
	luns, err := reportLUNs(ctx, s)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: REPORT LUNS: %v\n", err)
		return exitFailed
	}
	for _, n := range luns {
		blocks, bs, err := readCapacity(ctx, s, n)
		if err != nil {
			fmt.Fprintf(stderr, "ddpinitiator: READ CAPACITY of LUN %d: %v\n", n, err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "  LUN %d: %d blocks of %d octets (%s)\n", n, blocks, bs, human(int64(blocks)*int64(bs)))
	}
	if err := s.Logout(ctx); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: logout: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, "logged out")
	return exitOK
}

// reportLUNs returns the LUN numbers the target reports (REPORT LUNS).
func reportLUNs(ctx context.Context, s *initiator.Session) ([]uint16, error) {
	buf, err := s.Alloc(4096)
	if err != nil {
		return nil, err
	}
	defer s.Free(buf)
	cmd := &initiator.Command{CDB: []byte{0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, Dir: initiator.DataIn, Data: buf}
	if err := run1(ctx, s, cmd); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(buf)) / 8
	var luns []uint16
	for i := 0; i < n && 8+8*i+8 <= len(buf); i++ {
		v := binary.BigEndian.Uint16(buf[8+8*i:])
		switch v >> 14 {
		case 0: // peripheral, bus 0
			luns = append(luns, v&0xff)
		case 1: // flat space
			luns = append(luns, v&0x3fff)
		}
	}
	return luns, nil
}

// readCapacity returns a LUN's block count and block size (READ CAPACITY(16)).
func readCapacity(ctx context.Context, s *initiator.Session, lun uint16) (blocks uint64, bs uint32, err error) {
	buf, err := s.Alloc(32)
	if err != nil {
		return 0, 0, err
	}
	defer s.Free(buf)
	cmd := &initiator.Command{LUN: lun, CDB: []byte{0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0}, Dir: initiator.DataIn, Data: buf[:32]}
	if err := run1(ctx, s, cmd); err != nil {
		return 0, 0, err
	}
	return binary.BigEndian.Uint64(buf) + 1, binary.BigEndian.Uint32(buf[8:]), nil
}

// run1 runs a command and turns a status other than GOOD into an error.
func run1(ctx context.Context, s *initiator.Session, cmd *initiator.Command) error {
	if err := s.Do(ctx, cmd); err != nil {
		return err
	}
	if cmd.Status != 0 {
		return &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
	}
	return nil
}

// human prints a size in the largest binary unit that keeps one decimal.
func human(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
