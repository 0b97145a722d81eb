//go:build linux

package sctp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needKernel skips without kernel SCTP, except inside the vmlab guest,
// whose kernel has it: there its absence is a failure.
func needKernel(t *testing.T) {
	t.Helper()
	if KernelAvailable() {
		return
	}
	if os.Getenv("VMLAB_GUEST") == "1" {
		t.Fatal("no kernel SCTP inside the vmlab guest (is sctp.ko loaded?)")
	}
	t.Skip("this kernel has no SCTP: the kernel backend is tested inside the vmlab guest (integration/sctp)")
}

// rawPeer is a one-to-one kernel SCTP socket set up by hand, as a peer
// that is not DDP/SCTP (or not only): ali is its Adaptation Layer
// Indication (0: none in INIT/INIT-ACK). Blocking, with a receive timeout.
func rawPeer(t *testing.T, ali uint32) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if ali != 0 {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], ali)
		if err := unix.SetsockoptString(fd, solSCTP, sctpADAPTATIONLAYER, string(b[:])); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.SetsockoptInt(fd, solSCTP, sctpRECVRCVINFO, 1); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 20})
	return fd
}

func rawListen(t *testing.T, ali uint32) (int, string) {
	t.Helper()
	fd := rawPeer(t, ali)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	return fd, fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}

// TestKernelAdaptationIndication follows the table of 11.1 from both
// ends: a peer with the indication of DDP gets an association; one with
// none or another gets none (the dialer fails with ErrAdaptation, the
// listener aborts the association and offers nothing to Accept).
func TestKernelAdaptationIndication(t *testing.T) {
	needKernel(t)
	for _, tt := range []struct {
		name string
		ali  uint32
		ok   bool
	}{
		{"DDP", DDPAdaptation, true},
		{"NONE", 0, false},
		{"ANY-OTHER", 0x1234, false},
	} {
		t.Run("dial/"+tt.name, func(t *testing.T) {
			lfd, addr := rawListen(t, tt.ali)
			go func() {
				nfd, _, err := unix.Accept(lfd)
				if err == nil {
					// Until the abort or close. One read is not enough: a
					// notification can end it early, and closing then
					// would take the association away from the dialer
					// between its handshake and its SCTP_STATUS (EINVAL,
					// seen once in CI).
					b := make([]byte, 64)
					for {
						if n, err := unix.Read(nfd, b); err != nil || n == 0 {
							break
						}
					}
					unix.Close(nfd)
				}
			}()
			a, err := DialKernel(testCtx(t), addr, Config{})
			switch {
			case tt.ok && err != nil:
				t.Fatal(err)
			case tt.ok:
				a.Abort()
			case !errors.Is(err, ErrAdaptation):
				t.Fatalf("dialing a peer with indication %#x: %v, want ErrAdaptation", tt.ali, err)
			}
		})
		t.Run("listen/"+tt.name, func(t *testing.T) {
			l, err := ListenKernel("127.0.0.1:0", Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fd := rawPeer(t, tt.ali)
			ap := netip.MustParseAddrPort(l.Addr().String())
			err = unix.Connect(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())})
			// The listener may abort the association before the peer's
			// connect returns: that is the refusal this case wants.
			aborted := !tt.ok && (err == unix.ECONNREFUSED || err == unix.ECONNRESET)
			if err != nil && !aborted {
				t.Fatal(err)
			}
			if tt.ok {
				a, err := l.Accept(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				a.Abort()
				return
			}
			// The listener aborts the association: the peer reads an error
			// (ECONNRESET) or the end.
			if !aborted {
				buf := make([]byte, 64)
				n, err := unix.Read(fd, buf)
				if err == unix.EAGAIN || (err == nil && n > 0) {
					t.Fatalf("the association with indication %#x was not ended: %d octets, %v", tt.ali, n, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if a, err := l.Accept(ctx); err == nil {
				a.Abort()
				t.Fatal("an association without DDP's indication was offered to Accept")
			}
		})
	}
}

// TestKernelWire reads what the kernel backend sends on a raw socket:
// every chunk unordered (section 10), with the PPID (5.2.2, 5.2.3) and the
// stream of its session (section 8), the DDP-SSN leading its user data.
// A message larger than this end's maximum ends the association (9).
func TestKernelWire(t *testing.T) {
	needKernel(t)
	lfd, addr := rawListen(t, DDPAdaptation)
	a, err := DialKernel(testCtx(t), addr, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Abort()
	nfd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nfd)
	unix.SetsockoptTimeval(nfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 20})
	go a.Initiate(testCtx(t), 3, []byte("pd"))
	buf := make([]byte, 1024)
	oob := make([]byte, 64)
	n, oobn, _, _, err := unix.Recvmsg(nfd, buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 || cms[0].Header.Level != solSCTP || cms[0].Header.Type != sctpCmsgRCVINFO {
		t.Fatalf("control messages %+v, %v", cms, err)
	}
	ri := cms[0].Data
	sid, flags := binary.NativeEndian.Uint16(ri[0:]), binary.NativeEndian.Uint16(ri[4:])
	ppid := binary.BigEndian.Uint32(ri[8:])
	want, _ := AppendControl(nil, 0, FuncInitiate, []byte("pd"))
	if sid != 3 || flags&sctpUNORDERED == 0 || ppid != PPIDControl || string(buf[:n]) != string(want) {
		t.Fatalf("stream %d flags %#x PPID %#x data %x; want stream 3, unordered, PPID %#x, %x", sid, flags, ppid, PPIDControl, buf[:n], want)
	}
	// Larger than the dialer's maximum chunk: the association ends.
	big := make([]byte, a.MaxChunk()+4)
	if err := unix.Sendmsg(nfd, big, nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(testTimeout):
		t.Fatal("the association survived a message over its maximum")
	}
}

// TestKernelClose: after Shutdown and Abort nothing of the association is
// left: goroutines, sockets.
func TestKernelClose(t *testing.T) {
	needKernel(t)
	g, fds := runtime.NumGoroutine(), countFDs(t)
	for _, graceful := range []bool{true, false} {
		a, b := kernelPair(t)
		s, p := establish(t, a, b, 0, nil, nil)
		if err := s.WriteSegments([][]byte{{1, 2, 3}}, []int{1}); err != nil {
			t.Fatal(err)
		}
		if seg, err := p.NextSegment(); err != nil || len(seg) != 3 {
			t.Fatalf("%x %v", seg, err)
		}
		// A reader blocked on the session wakes when the association ends.
		done := make(chan error, 1)
		go func() { _, err := s.NextSegment(); done <- err }()
		if graceful {
			s.Close()
			p.Close()
			if err := a.Shutdown(); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			b.Shutdown()
		} else {
			a.Abort()
			b.Abort()
		}
		if err := <-done; err == nil {
			t.Fatal("NextSegment returned no error after the association ended")
		}
	}
	for i := 0; i < 500 && (runtime.NumGoroutine() > g || countFDs(t) > fds); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n, f := runtime.NumGoroutine(), countFDs(t); n > g || f > fds {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines (%d before), %d fds (%d before)\n%s", n, g, f, fds, buf[:runtime.Stack(buf, true)])
	}
}

func countFDs(t *testing.T) int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(d)
}
