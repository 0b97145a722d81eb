package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var netDialer net.Dialer

// limit is what plain TCP does on this machine in the same run.
type limit struct {
	tcpBps   float64 // one iperf3 stream, octets per second
	rttP50   float64 // ping-pong round trip, seconds
	rttP99   float64
	pingRate float64 // round trips per second
}

// Ping-pong sizes: an iSER SCSI Command Send (iSER header, BHS) and a
// 4 KiB read's reply, as the floor.
const (
	pingLen = 76
	pongLen = 4144
)

// startLimits starts the servers of the TCP limit measurements.
func (h *harness) startLimits(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := h.spawn(h.pinned(serverCPU, "iperf3", "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(h.o.tcpPort)), "iperf3.log"); err != nil {
		return err
	}
	if _, err := h.spawn(h.pinned(serverCPU, self, "pingpong", "-serve", fmt.Sprintf("127.0.0.1:%d", h.o.tcpPort+1)), "pingpong.log"); err != nil {
		return err
	}
	for _, port := range []int{h.o.tcpPort, h.o.tcpPort + 1} {
		if err := waitPort(ctx, port); err != nil {
			return err
		}
	}
	return nil
}

// limits measures plain TCP: one iperf3 stream, and the ping-pong.
func (h *harness) limits(ctx context.Context) (limit, error) {
	var l limit
	secs := strconv.Itoa(max(1, int(h.o.runtime.Seconds())))
	var out []byte
	var err error
	for try := 0; ; try++ { // the server may still be busy with waitPort's probe
		out, _, err = h.client(ctx, []string{"iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(h.o.tcpPort), "-J", "-t", secs})
		if err == nil || try == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return l, err
	}
	var r struct {
		End struct {
			SumReceived struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Error != "" {
		return l, fmt.Errorf("iperf3: %v %s", err, r.Error)
	}
	l.tcpBps = r.End.SumReceived.BPS / 8
	self, err := os.Executable()
	if err != nil {
		return l, err
	}
	out, _, err = h.client(ctx, []string{self, "pingpong", "-dial", fmt.Sprintf("127.0.0.1:%d", h.o.tcpPort+1), "-for", h.o.runtime.String()})
	if err != nil {
		return l, err
	}
	if _, err := fmt.Sscanf(string(out), "%g %g %g", &l.pingRate, &l.rttP50, &l.rttP99); err != nil {
		return l, fmt.Errorf("ping-pong said %q", out)
	}
	return l, nil
}

// pingpongMain is the ping-pong's two ends: -serve answers every ping
// with a pong; -dial runs one in flight for -for and prints round trips
// per second and the median and 99th percentile round trip in seconds.
func pingpongMain(args []string) int {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	serve := fs.String("serve", "", "listen address")
	dial := fs.String("dial", "", "server address")
	dur := fs.Duration("for", 5*time.Second, "how long the client runs")
	if fs.Parse(args) != nil {
		return 2
	}
	var err error
	switch {
	case *serve != "":
		err = pingServe(*serve)
	case *dial != "":
		err = pingDial(*dial, *dur)
	default:
		err = errors.New("-serve or -dial")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		return 1
	}
	return 0
}

func pingServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			f, fd, err := blockingFD(c)
			if err != nil {
				return
			}
			defer f.Close()
			ping, pong := make([]byte, pingLen), make([]byte, pongLen)
			for {
				if readFull(fd, ping) != nil || writeAll(fd, pong) != nil {
					return
				}
			}
		}()
	}
}

// blockingFD puts the connection's socket in blocking mode on a locked
// thread, so that the ping-pong runs as a C program's would: one blocking
// read or write per step, no poller and no scheduler in between. (Go's
// net.Conn waits in epoll and tells the scheduler about each call; in a VM
// the wake-ups that costs doubled the round trip, more than the floor it
// is meant to be.) The caller keeps the thread locked.
func blockingFD(c net.Conn) (*os.File, int, error) {
	runtime.LockOSThread()
	f, err := c.(*net.TCPConn).File() // a duplicate of the socket, closed by the caller
	if err != nil {
		return nil, -1, err
	}
	fd := int(f.Fd())
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, -1, err
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return f, fd, nil
}

// readFull and writeAll are blocking reads and writes made as raw system
// calls: the thread is this process's only worker.
func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return e
		case n == 0:
			return io.EOF
		}
		b = b[n:]
	}
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return e
		}
		b = b[n:]
	}
	return nil
}

func pingDial(addr string, d time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	f, fd, err := blockingFD(c)
	if err != nil {
		return err
	}
	defer f.Close()
	ping, pong := make([]byte, pingLen), make([]byte, pongLen)
	rtts := make([]time.Duration, 0, 1<<22)
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		if err := writeAll(fd, ping); err != nil {
			return err
		}
		if err := readFull(fd, pong); err != nil {
			return err
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	n := len(rtts)
	fmt.Printf("%g %g %g\n", float64(n)/time.Since(start).Seconds(), rtts[n/2].Seconds(), rtts[n*99/100].Seconds())
	return nil
}
