package iwarp

import (
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp/spin"
	"golang.org/x/sys/unix"
)

// maxIOV is the most iovecs one readv or writev takes (Linux IOV_MAX).
const maxIOV = 1024

// sock does readv and writev on a TCP connection through Go's poller,
// without allocating: the iovec arrays and the callbacks are made once.
// One goroutine reads, and one at a time writes (the sender's lock
// serializes the sender goroutine and direct posters).
//
// The socket is non-blocking, so readv and writev never wait: they are
// made as raw system calls, without telling the scheduler. Through
// syscall.Syscall, a loopback writev (which runs the peer's TCP receive
// too) often outlasts sysmon's 20 µs tick: sysmon then hands the
// processor to another thread and, seeing that, keeps polling every 20
// µs. Under a virtual machine every such wake-up is a costly switch; at
// queue depth 1 they cost ddptarget 50-140 µs of CPU per 4 KiB I/O
// instead of 30, and halved IOPS (see docs/performance.md).
type sock struct {
	tc *net.TCPConn
	rc syscall.RawConn

	rbufs [][]byte
	riov  []unix.Iovec // advanced by nothing: always riovs[:n]
	rn    int
	rerr  error
	rfn   func(fd uintptr) bool
	// spin: how long readv polls before it waits in the poller, at the
	// least (turn may make it longer); tfn is one poll, ragain its EAGAIN.
	spin    time.Duration
	tfn     func(fd uintptr) bool
	ragain  bool
	tryRead func() (bool, error) // one poll, for spin.Turnaround.Poll
	// awaitedOnly: spin only for an awaited answer
	// (ConnConfig.ReadSpinAwaitedOnly), which aw tracks (awaitAnswer);
	// aw also holds the engine's own read deadline (setReadDeadline).
	awaitedOnly bool
	caught      *atomic.Uint64 // Counters.SpinCaught, or nil
	aw          spin.Awaited
	block       func() error // one wait in the poller, for aw.Wait

	wbufs [][]byte
	wiov  []unix.Iovec // what is left of wiovs to write
	wiovs []unix.Iovec // the array behind wiov
	werr  error
	wfn   func(fd uintptr) bool
	// weor: wiov reaches the end of what writev was given, so its
	// sendmsg carries MSG_EOR (see doWrite).
	weor bool
	wmsg unix.Msghdr
	// corked: TCP_CORK is set (setCork).
	corked bool
	// cuts, for tests: the writes the socket took in parts.
	cuts *writeCuts
	// wblocked: a writev waits for socket space (set by the sender, read
	// by a spinning receiver, which then lets the poller run).
	wblocked atomic.Bool
	// turn times the peer's answers: from this end's last write that
	// sent something to the next message's first octets (see readv).
	turn spin.Turnaround
	// wtry: the writev is writeSome's, which never waits; wagain, that
	// the socket took no more.
	wtry, wagain bool

	mss    int
	mssErr error
	mssFn  func(fd uintptr)
}

func newSock(tc *net.TCPConn, spin time.Duration) (*sock, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &sock{tc: tc, rc: rc, riov: make([]unix.Iovec, 0, maxIOV), wiovs: make([]unix.Iovec, 0, maxIOV)}
	s.rfn = s.doRead
	s.spin = spin
	s.tfn = func(fd uintptr) bool { s.ragain = !s.doRead(fd); return true }
	s.tryRead = func() (bool, error) {
		if err := s.read(s.tfn); err != nil {
			return false, err
		}
		return !s.ragain, nil
	}
	s.block = func() error { return s.rc.Read(s.rfn) }
	s.wfn = s.doWrite
	return s, nil
}

// fillIOV sets iov to describe bufs (empty ones skipped), at most maxIOV.
func fillIOV(iov []unix.Iovec, bufs [][]byte) []unix.Iovec {
	iov, _ = fillIOVAll(iov, bufs)
	return iov
}

// fillIOVAll is fillIOV that also says whether iov holds all of bufs.
func fillIOVAll(iov []unix.Iovec, bufs [][]byte) ([]unix.Iovec, bool) {
	iov = iov[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if len(iov) == maxIOV {
			return iov, false
		}
		v := unix.Iovec{Base: unsafe.SliceData(b)}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	return iov, true
}

// readv reads into bufs in order and returns how many octets arrived: at
// least one, or an error (io.EOF when the peer closed its half). With poll
// it polls first (for s.spin, or longer for a slower peer: see
// spin.Turnaround) before it waits in the poller: for the next message,
// not for the rest of one, whose octets are already on their way (polling
// for those costs a readv per few octets).
func (s *sock) readv(bufs [][]byte, poll bool) (int, error) {
	s.rbufs = bufs
	s.riov = fillIOV(s.riov, bufs)
	if len(s.riov) == 0 {
		return 0, nil
	}
	s.rn, s.rerr = 0, nil
	if poll && s.spin > 0 && !s.awaitedOnly {
		// Poll first (see ConnConfig.ReadSpin): each try is one readv
		// under the poller's lock on the descriptor, never a wait.
		//
		// How long is the peer's measured turnaround (spin.Turnaround):
		// a peer slower than s.spin, within a bound, gets a longer spin,
		// lasting from this end's last write (spin.Turnaround.Poll).
		//
		// Yield first: the message just taken has usually readied its
		// consumer (the connection's loop) on this processor, and the
		// answer it sends is what the peer waits for; a poll now would
		// almost always find nothing and only delay it. 4 KiB QD1 in
		// process, paired: 1.03-1.58x in 8 rounds, 0.81-1.18x (5 of 6
		// better) with the order reversed (docs/performance.md).
		runtime.Gosched()
		got, err := s.turn.Poll(s.spin, s.tryRead, &s.wblocked)
		if err != nil {
			return 0, err
		}
		if got {
			s.spinCaught()
			return s.rn, s.rerr
		}
	}
	if poll && s.spin > 0 {
		got, err := s.waitAwaited()
		if err != nil {
			return 0, err
		}
		if got {
			return s.rn, s.rerr
		}
	} else if err := s.read(s.rfn); err != nil {
		return 0, err
	}
	if poll && s.spin > 0 {
		s.turn.Arrived(spin.Now(), s.spin)
	}
	return s.rn, s.rerr
}

// waitAwaited waits in the poller for the next message, with s.rbufs set
// up, spinning instead for an answer the ULP awaits (spin.Awaited.Wait).
// It returns whether octets came from a spin; when not, the wait's read
// has been made (s.rn, s.rerr).
func (s *sock) waitAwaited() (bool, error) {
	polled, caught, err := s.aw.Wait(s.tc, s.spinAwaited, s.block)
	if caught {
		s.spinCaught()
	}
	return polled, err
}

// spinAwaited polls for an awaited answer.
func (s *sock) spinAwaited() (bool, error) {
	s.rn, s.rerr = 0, nil
	return s.turn.Poll(s.spin, s.tryRead, &s.wblocked)
}

// read is rc.Read(fn) that a kick does not fail (spin.Awaited.Retry).
func (s *sock) read(fn func(fd uintptr) bool) error {
	for {
		err := s.rc.Read(fn)
		if err == nil || !s.aw.Retry(s.tc) {
			return err
		}
	}
}

// spinCaught counts a message a spin found.
func (s *sock) spinCaught() {
	if s.caught != nil && s.rerr == nil {
		s.caught.Add(1)
	}
}

// awaitAnswer: the ULP waits for an answer (QP.AwaitAnswer).
func (s *sock) awaitAnswer() {
	if s.spin > 0 {
		s.aw.Await(s.tc)
	}
}

// setReadDeadline sets the engine's read deadline (the zero time clears
// it); a kick (awaitAnswer) never undoes it.
func (s *sock) setReadDeadline(t time.Time) {
	s.aw.SetReadDeadline(s.tc, t)
}

func (s *sock) doRead(fd uintptr) bool {
	n, _, e := unix.RawSyscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&s.riov[0])), uintptr(len(s.riov)))
	switch {
	case e == unix.EAGAIN:
		return false
	case e == unix.EINTR:
		return s.doRead(fd)
	case e != 0:
		s.rerr = &net.OpError{Op: "readv", Net: "tcp", Err: e}
	case n == 0:
		s.rerr = io.EOF
	default:
		s.rn = int(n)
	}
	return true
}

// writev writes every octet of bufs, in as few system calls as it can. bufs
// is consumed (its slices are advanced in place).
func (s *sock) writev(bufs [][]byte) error {
	for len(bufs) > 0 {
		s.wbufs = bufs
		s.wiov, s.weor = fillIOVAll(s.wiovs, bufs)
		if len(s.wiov) == 0 {
			return nil
		}
		s.werr = nil
		err := s.rc.Write(s.wfn)
		s.wblocked.Store(false)
		if err != nil {
			return err
		}
		if s.werr != nil {
			return s.werr
		}
		bufs = s.wbufs // what lay beyond the first maxIOV iovecs
	}
	return nil
}

// writeSome writes what the socket takes now, without waiting, and returns
// what is left of bufs (nil when every octet went). bufs is consumed as by
// writev; the rest is for writev to finish.
func (s *sock) writeSome(bufs [][]byte) ([][]byte, error) {
	s.wtry = true
	defer func() { s.wtry = false }()
	for len(bufs) > 0 {
		s.wbufs = bufs
		s.wiov, s.weor = fillIOVAll(s.wiovs, bufs)
		if len(s.wiov) == 0 {
			return nil, nil
		}
		s.werr, s.wagain = nil, false
		if err := s.rc.Write(s.wfn); err != nil {
			return nil, err
		}
		if s.werr != nil {
			return nil, s.werr
		}
		bufs = s.wbufs
		if s.wagain {
			return bufs, nil
		}
	}
	return nil, nil
}

// doWrite writes as much of s.wiov as the socket takes, advancing s.wbufs,
// and asks the poller to wait when the socket is full (writeSome's: gives
// up instead).
//
// What the caller gives writev ends on an FPDU's end, and the Framer sized
// the FPDUs to fill whole EMSS-sized stretches from its start: the sendmsg
// that takes the last of it says MSG_EOR, which keeps Linux's TCP from
// appending the next write to this one's last segment while that is still
// unsent. That is the facility RFC 5044 5.1 asks a sender to use so that
// segments start with FPDUs (appendix A.1). Topped up, a segment ends
// inside an FPDU, every later segment boundary of the write falls inside
// one too, and now and then one splits an FPDU's CRC. Receivers must cope
// (5.1), but Linux's siw copies the second part of a split CRC over the
// first and reports a CRC error (docs/performance.md, fourteenth session).
// The kernel sets the mark only once sendmsg took every octet, so a
// partial write leaves the stream open for its rest.
func (s *sock) doWrite(fd uintptr) bool {
	for len(s.wiov) > 0 {
		s.wmsg.Iov = &s.wiov[0]
		s.wmsg.SetIovlen(len(s.wiov))
		var flags uintptr
		if s.weor {
			flags = unix.MSG_EOR
		}
		n, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&s.wmsg)), flags)
		switch {
		case e == unix.EAGAIN && s.wtry:
			s.wagain = true
			return true
		case e == unix.EAGAIN:
			s.wblocked.Store(true)
			return false
		case e == unix.EINTR:
			continue
		case e != 0:
			s.werr = &net.OpError{Op: "writev", Net: "tcp", Err: e}
			return true
		}
		s.turn.Wrote()
		s.wbufs = advance(s.wbufs, int(n))
		s.wiov = advanceIOV(s.wiov, int(n))
		cut, end := len(s.wiov) > 0, len(s.wiov) == 0 && s.weor
		switch {
		case cut && !s.corked:
			s.setCork(fd, true)
		case end && s.corked:
			s.setCork(fd, false)
		}
		if s.cuts != nil {
			s.cuts.wrote(int(n), cut, end)
		}
	}
	return true
}

// writeCuts, for tests, follows the stream's writes and reports those the
// socket took in parts, as stream offsets, once each has ended.
type writeCuts struct {
	sent, start uint64
	in, cut     bool
	report      func(start, end uint64)
}

// wrote notes a sendmsg that took n octets: cut, the write goes on; end,
// it is done.
func (w *writeCuts) wrote(n int, cut, end bool) {
	if !w.in {
		w.in, w.start, w.cut = true, w.sent, false
	}
	w.sent += uint64(n)
	w.cut = w.cut || cut
	if end {
		if w.in = false; w.cut {
			w.report(w.start, w.sent)
		}
	}
}

// setCork sets TCP_CORK while a write is taken in part: the socket was
// full, and the rest goes when it has room. Until then TCP must not send
// the write's last, partly filled segment as it is, which would start the
// rest's segments at some octet inside an FPDU; corked, it tops that
// segment up with the rest. Uncorking sends what is left.
func (s *sock) setCork(fd uintptr, on bool) {
	v := 0
	if on {
		v = 1
	}
	if unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) == nil {
		s.corked = on
	}
}

// advance drops the first n octets of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

// advanceIOV drops the first n octets of iov.
func advanceIOV(iov []unix.Iovec, n int) []unix.Iovec {
	for len(iov) > 0 && uint64(n) >= iov[0].Len {
		n -= int(iov[0].Len)
		iov = iov[1:]
	}
	if len(iov) > 0 && n > 0 {
		iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
		iov[0].Len -= uint64(n)
	}
	return iov
}

// emss reads the connection's current effective MSS (TCP_MAXSEG).
func (s *sock) emss() (int, error) {
	if s.mssFn == nil {
		s.mssFn = s.doMSS
	}
	if err := s.rc.Control(s.mssFn); err != nil {
		return 0, err
	}
	return s.mss, s.mssErr
}

func (s *sock) doMSS(fd uintptr) {
	s.mss, s.mssErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
}
