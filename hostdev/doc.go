// Package hostdev is the initiator host's side of ddpstore: how a LUN that
// transport/initiator reaches is presented on this host. Its packages stand
// above transport/ and may import it; nothing below imports them.
//
//   - remote: one LUN of a session as a byte-addressed disk over registered
//     buffer slots
//   - lunfs: a FUSE filesystem of one file per LUN
//   - loop: loop devices over those files
//   - bench: an in-process I/O driver over a session, with latency statistics
//   - session: logging in to a target as the configuration says
//   - mount: FUSE mounts of a session's LUNs as processes, their state files,
//     and loop devices attached to their files
//   - nbd: a LUN as a kernel NBD device (/dev/nbdN) served by this process
//     over a socketpair
//   - ublk: a LUN as a ublk block device (/dev/ublkbN) served by this
//     process over io_uring
//   - attach: a session's LUNs as NBD or ublk devices of a process of their
//     own, their state files, recovery after the process died, and detach
//
// The target's backing stores are in blockdev/, below transport/lu.
package hostdev

import "fmt"

// HumanSize prints a size in the largest binary unit that keeps one
// decimal: "4.0 MiB".
func HumanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
