// Package hostdev is the initiator host's side of ddpstore: how a LUN that
// transport/initiator reaches is presented on this host. Its packages stand
// above transport/ and may import it; nothing below imports them.
//
//   - remote: one LUN of a session as a byte-addressed disk over registered
//     buffer slots
//   - lunfs: a FUSE filesystem of one file per LUN
//   - loop: loop devices over those files
//
// The target's backing stores are in blockdev/, below transport/lu.
package hostdev
