// Package soak runs ddptarget and ddpinitiator as processes for a long
// while under verified I/O and chaos, and fails if data is wrong, a process
// dies, or a long-lived process's memory, goroutines or file descriptors
// keep growing: "make soak" (DURATION, default 10m) and a 2-minute run in
// "make test". Without SOAK_DURATION, as root and with /dev/fuse, the test
// skips and says so. See docs/operations.md.
package soak
