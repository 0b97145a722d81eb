package hostdev

import (
	"os"
	"runtime"
)

// BlockingProcs gives a process that serves a device from a thread
// blocked in a system call (ublk's io_uring_enter, FUSE's io_uring
// queues, NBD's socket) at least two Go processors. A processor stays with
// the thread in the call; with one, as under `taskset -c 1` or a one-CPU
// cpuset, none is left to poll the network for the target's answer until
// the runtime's monitor takes the processor back, 20 µs to 10 ms later:
// every I/O waited for it. A second processor is idle while the thread
// blocks, so it polls the network at once. GOMAXPROCS in the environment
// still decides.
//
// The classic FUSE transport (hostdev/lunfs) waits in the network poller
// instead and does best with the processors Go chooses.
func BlockingProcs() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
