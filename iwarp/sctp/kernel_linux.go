//go:build linux

package sctp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoKernelSCTP: the kernel has no SCTP (no sctp module).
var ErrNoKernelSCTP = errors.New("sctp: this kernel has no SCTP")

// KernelAvailable reports whether this kernel opens SCTP sockets.
func KernelAvailable() bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// kernelSocketBuffer is the socket buffer size asked for.
const kernelSocketBuffer = 4 << 20

// DDPAdaptation is the Adaptation Indication of DDP (section 5.1).
const DDPAdaptation = 1

// KernelAddr is the address of a kernel SCTP endpoint (one address:
// multihoming is not used, 7.2).
type KernelAddr struct{ netip.AddrPort }

// Network returns "sctp".
func (KernelAddr) Network() string { return NetworkKernel }

// kernelBackend runs the association in the kernel over a one-to-one
// (SOCK_STREAM) SCTP socket (RFC 6458 section 4), through the Go runtime's
// network poller: no goroutine holds a thread while it waits, and closing
// the socket wakes its reader. Every message is one unordered DATA chunk
// (SCTP_SNDINFO with SCTP_UNORDERED and the PPID, section 10), never
// fragmented by SCTP (SCTP_DISABLE_FRAGMENTS, section 9). The Adaptation
// Layer Indication travels in INIT and INIT-ACK (SCTP_ADAPTATION_LAYER,
// 5.1) and the peer's is checked per 11.1 before the association is used.
type kernelBackend struct {
	f      *os.File
	rc     syscall.RawConn
	nstrm  int
	maxUD  int
	laddr  net.Addr
	raddr  net.Addr
	a      *Association
	drain  chan struct{} // closed by shutdown: the reader discards what arrives
	dOnce  sync.Once
	rdone  chan struct{} // closed when the reader returns
	ackc   chan struct{} // SCTP_SENDER_DRY_EVENT came (see ackNotify)
	cOnce  sync.Once
	scrach []byte // the reader's buffer while draining

	// The reader's recvmsg, set up once (no allocation per message).
	rmsg  unix.Msghdr
	riov  unix.Iovec
	roob  [64]byte
	rn    int
	rflag int
	rerr  error
	rfn   func(fd uintptr) bool

	// The writers' sendmsg, serialized by wmu.
	wmu  sync.Mutex
	wmsg unix.Msghdr
	wiov []unix.Iovec
	woob [64]byte
	werr error
	wfn  func(fd uintptr) bool
}

// kernelSocket opens a one-to-one SCTP socket for family with the options
// of a DDP/SCTP endpoint, set before the association exists so that they
// apply to its INIT or INIT-ACK.
func kernelSocket(family int, cfg Config) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
			return -1, ErrNoKernelSCTP
		}
		return -1, fmt.Errorf("sctp: socket: %w", err)
	}
	if err := setKernelOptions(fd, cfg); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func setKernelOptions(fd int, cfg Config) error {
	// Equal inbound and outbound stream counts (section 8).
	var initmsg [sctpInitmsgLen]byte
	binary.NativeEndian.PutUint16(initmsg[0:], uint16(cfg.Streams)) // sinit_num_ostreams
	binary.NativeEndian.PutUint16(initmsg[2:], uint16(cfg.Streams)) // sinit_max_instreams
	// The Adaptation Layer Indication of DDP in INIT and INIT-ACK (5.1,
	// 11.1).
	var ali [4]byte
	binary.NativeEndian.PutUint32(ali[:], DDPAdaptation)
	// A SACK for every packet (sack_freq 1, RFC 6458 8.1.19): on a path
	// whose MTU takes a whole 64 KiB chunk, the receive window holds only a
	// few, and a SACK held back for its delay would stall the sender.
	var sack [sctpSackInfoLen]byte
	binary.NativeEndian.PutUint32(sack[8:], 1) // sack_freq
	opts := []struct {
		name string
		opt  int
		val  []byte
	}{
		{"SCTP_INITMSG", sctpINITMSG, initmsg[:]},
		{"SCTP_ADAPTATION_LAYER", sctpADAPTATIONLAYER, ali[:]},
		// The peer's indication and the association's changes arrive as
		// notifications (RFC 6458 6.1.1, 6.1.9).
		{"SCTP_EVENT(SCTP_ASSOC_CHANGE)", sctpEVENT, sctpEvent(sctpASSOCCHANGE)},
		{"SCTP_EVENT(SCTP_ADAPTATION_INDICATION)", sctpEVENT, sctpEvent(sctpADAPTATIONINDICATION)},
		{"SCTP_DELAYED_SACK", sctpDELAYEDSACK, sack[:]},
	}
	for _, o := range opts {
		if err := unix.SetsockoptString(fd, solSCTP, o.opt, string(o.val)); err != nil {
			return fmt.Errorf("sctp: setsockopt %s: %w", o.name, err)
		}
	}
	ints := []struct {
		name string
		opt  int
	}{
		// Untagged messages are not delayed for bundling (11.2).
		{"SCTP_NODELAY", sctpNODELAY},
		// A message larger than one DATA chunk fails instead of being
		// fragmented (section 9).
		{"SCTP_DISABLE_FRAGMENTS", sctpDISABLEFRAGMENTS},
		// Each message comes with its stream and PPID (RFC 6458 5.3.5).
		{"SCTP_RECVRCVINFO", sctpRECVRCVINFO},
	}
	for _, o := range ints {
		if err := unix.SetsockoptInt(fd, solSCTP, o.opt, 1); err != nil {
			return fmt.Errorf("sctp: setsockopt %s: %w", o.name, err)
		}
	}
	// Socket buffers for a window of chunks (the kernel caps them at
	// net.core.[rw]mem_max).
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, kernelSocketBuffer)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, kernelSocketBuffer)
	return nil
}

// sctpEvent is a struct sctp_event turning notification typ on.
func sctpEvent(typ uint16) []byte {
	var b [sctpEventLen]byte
	// se_assoc_id 0 (SCTP_FUTURE_ASSOC; ignored on one-to-one sockets).
	binary.NativeEndian.PutUint16(b[4:], typ)
	b[6] = 1 // se_on
	return b[:]
}

func sockaddr(ap netip.AddrPort) (unix.Sockaddr, int) {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, unix.AF_INET6
}

func addrOf(sa unix.Sockaddr) net.Addr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return KernelAddr{netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))}
	case *unix.SockaddrInet6:
		return KernelAddr{netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))}
	}
	return KernelAddr{}
}

func resolve(ctx context.Context, addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("sctp: no address for %s", host)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(p)), nil
}

// sourceFor returns the local address the routing table picks for dst: the
// one address a dialing endpoint binds (7.2: not every address of the
// host, as an unbound SCTP socket would offer).
func sourceFor(dst netip.AddrPort) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// DialKernel sets up an association with kernel SCTP to addr (host:port),
// checking the peer's Adaptation Layer Indication (11.1).
func DialKernel(ctx context.Context, addr string, cfg Config) (*Association, error) {
	cfg = cfg.withDefaults()
	dst, err := resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	rsa, family := sockaddr(dst)
	fd, err := kernelSocket(family, cfg)
	if err != nil {
		return nil, err
	}
	if src, err := sourceFor(dst); err == nil {
		lsa, _ := sockaddr(netip.AddrPortFrom(src, 0))
		if err := unix.Bind(fd, lsa); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("sctp: bind %v: %w", src, err)
		}
	}
	if err := unix.Connect(fd, rsa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, fmt.Errorf("sctp: connect %s: %w", addr, err)
	}
	k, err := newKernelBackend(fd)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		k.f.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { k.f.SetReadDeadline(time.Unix(1, 0)) })
	err = k.handshake()
	stop()
	if err != nil {
		k.abortClose()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("sctp: association with %s: %w", addr, err)
	}
	k.f.SetReadDeadline(time.Time{})
	return newAssociation(k, cfg), nil
}

func newKernelBackend(fd int) (*kernelBackend, error) {
	f := os.NewFile(uintptr(fd), "sctp")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	k := &kernelBackend{f: f, rc: rc, drain: make(chan struct{}), rdone: make(chan struct{}), ackc: make(chan struct{}, 1)}
	k.rfn = k.recvmsg
	k.wfn = k.sendmsg
	k.rmsg.Iov = &k.riov
	k.rmsg.SetIovlen(1)
	if sa, err := unix.Getsockname(fd); err == nil {
		k.laddr = addrOf(sa)
	}
	return k, nil
}

// handshake reads the notifications that open the association: the
// SCTP_ASSOC_CHANGE of SCTP_COMM_UP and the peer's Adaptation Layer
// Indication, which Linux queues together, the indication right after
// SCTP_COMM_UP and before any message. The table of 11.1: an indication
// of DDP, and the association carries DDP; none (nothing follows
// SCTP_COMM_UP) or any other, and "DDP procedures MUST NOT be performed
// upon this association" (ErrAdaptation).
func (k *kernelBackend) handshake() error {
	buf := make([]byte, 512)
	up, ali := false, false
	for !up || !ali {
		var n, flags int
		var rerr error
		block := !up
		err := k.rc.Read(func(fd uintptr) bool {
			var oobn int
			n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
			_ = oobn
			return !block || rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		switch {
		case up && err == unix.EAGAIN:
			return fmt.Errorf("%w (none in INIT/INIT-ACK)", ErrAdaptation)
		case err != nil:
			return err
		case n == 0 && flags&msgNOTIFICATION == 0:
			return fmt.Errorf("%w: association ended while being set up", ErrLost)
		case flags&msgNOTIFICATION == 0:
			if up {
				return fmt.Errorf("%w (none in INIT/INIT-ACK)", ErrAdaptation)
			}
			return errors.New("sctp: a message before the association came up")
		}
		typ, ind, state, in, out, err := parseNotification(buf[:n])
		if err != nil {
			return err
		}
		switch typ {
		case sctpASSOCCHANGE:
			if state != sctpCOMMUP {
				return fmt.Errorf("%w: association change %d while being set up", ErrLost, state)
			}
			up = true
			k.nstrm = int(min(in, out))
		case sctpADAPTATIONINDICATION:
			if ind != DDPAdaptation {
				return fmt.Errorf("%w (indication %#x)", ErrAdaptation, ind)
			}
			ali = true
		}
	}
	var st [sctpStatusLen]byte
	if err := k.status(st[:]); err != nil {
		if errors.Is(err, unix.EINVAL) {
			// A one-to-one socket answers EINVAL once its association
			// is no longer established: the peer ended it at once.
			return fmt.Errorf("%w: association ended as it came up (%v)", ErrLost, err)
		}
		return err
	}
	// The largest user data of one unfragmented DATA chunk (section 9).
	fp := int(binary.NativeEndian.Uint32(st[statusFragPointOff:]))
	k.maxUD = fp - fp%4
	if k.nstrm == 0 {
		k.nstrm = int(min(binary.NativeEndian.Uint16(st[statusInstrmsOff:]), binary.NativeEndian.Uint16(st[statusOutstrmsOff:])))
	}
	k.rc.Control(func(fd uintptr) {
		if sa, err := unix.Getpeername(int(fd)); err == nil {
			k.raddr = addrOf(sa)
		}
	})
	return nil
}

// parseNotification decodes the notifications the backend subscribes to
// (RFC 6458 6.1): the type, and for SCTP_ADAPTATION_INDICATION the
// indication, for SCTP_ASSOC_CHANGE the state and stream counts.
func parseNotification(b []byte) (typ uint16, ind uint32, state, in, out uint16, err error) {
	if len(b) < notificationHeaderLen {
		return 0, 0, 0, 0, 0, fmt.Errorf("sctp: notification of %d octets", len(b))
	}
	typ = binary.NativeEndian.Uint16(b)
	switch typ {
	case sctpASSOCCHANGE:
		if len(b) < assocChangeLen {
			return 0, 0, 0, 0, 0, fmt.Errorf("sctp: association change of %d octets", len(b))
		}
		state = binary.NativeEndian.Uint16(b[8:])
		out = binary.NativeEndian.Uint16(b[12:])
		in = binary.NativeEndian.Uint16(b[14:])
	case sctpADAPTATIONINDICATION:
		if len(b) < adaptationEventLen {
			return 0, 0, 0, 0, 0, fmt.Errorf("sctp: adaptation indication of %d octets", len(b))
		}
		ind = binary.NativeEndian.Uint32(b[8:])
	}
	return typ, ind, state, in, out, nil
}

// status reads SCTP_STATUS (RFC 6458 8.2.1).
func (k *kernelBackend) status(b []byte) error {
	var serr error
	err := k.rc.Control(func(fd uintptr) {
		l := uint32(len(b))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, solSCTP, sctpSTATUS,
			uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			serr = fmt.Errorf("sctp: getsockopt SCTP_STATUS: %w", e)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

func (k *kernelBackend) start(a *Association) {
	k.a = a
	k.scrach = make([]byte, a.recvSize)
	a.wg.Add(1)
	go k.readLoop()
}

// recvmsg is the reader's RawConn.Read function: one recvmsg into riov.
func (k *kernelBackend) recvmsg(fd uintptr) bool {
	k.rmsg.Control = &k.roob[0]
	k.rmsg.SetControllen(len(k.roob))
	k.rmsg.Flags = 0
	n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&k.rmsg)), 0)
	for e == unix.EINTR {
		k.rmsg.SetControllen(len(k.roob))
		k.rmsg.Flags = 0
		n, _, e = unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&k.rmsg)), 0)
	}
	if e == unix.EAGAIN {
		return false
	}
	k.rn, k.rflag, k.rerr = int(n), int(k.rmsg.Flags), nil
	if e != 0 {
		k.rn, k.rerr = 0, e
	}
	return true
}

// rcvinfo finds the SCTP_RCVINFO of the last message: its stream and PPID
// (in network byte order on the wire and in the structure).
func (k *kernelBackend) rcvinfo() (stream uint16, ppid uint32, ok bool) {
	oob := k.roob[:k.rmsg.Controllen]
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0, 0, false
		}
		if h.Level == solSCTP && h.Type == sctpCmsgRCVINFO && int(h.Len) >= unix.CmsgLen(sctpRcvinfoLen) {
			d := oob[unix.CmsgLen(0):]
			return binary.NativeEndian.Uint16(d[0:]), binary.BigEndian.Uint32(d[8:]), true
		}
		oob = oob[min(unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)), len(oob)):]
	}
	return 0, 0, false
}

// getBuf is the association's getBuf, or the scratch buffer once the
// association is shutting down.
func (k *kernelBackend) getBuf() []byte {
	select {
	case b := <-k.a.pool:
		return b
	case <-k.drain:
		return k.scrach
	case <-k.a.done:
		return nil
	}
}

func (k *kernelBackend) putBuf(b []byte) {
	if &b[:1][0] != &k.scrach[0] {
		k.a.putBuf(b)
	}
}

// readLoop hands each whole message to the association and acts on the
// notifications, until the association ends.
func (k *kernelBackend) readLoop() {
	a := k.a
	defer a.wg.Done()
	defer close(k.rdone)
	for {
		buf := k.getBuf()
		if buf == nil {
			return
		}
		k.riov.Base = &buf[0]
		k.riov.SetLen(len(buf))
		err := k.rc.Read(k.rfn)
		k.riov.Base = nil
		if err == nil {
			err = k.rerr
		}
		n, flags := k.rn, k.rflag
		switch {
		case err != nil:
			k.putBuf(buf)
			a.end(fmt.Errorf("%w: %v", ErrLost, err))
			return
		case flags&msgNOTIFICATION != 0:
			typ, _, state, _, _, perr := parseNotification(buf[:n])
			k.putBuf(buf)
			if perr == nil && typ == sctpSENDERDRYEVENT {
				k.senderDry(false)
				select {
				case k.ackc <- struct{}{}:
				default:
				}
				continue
			}
			if perr == nil && typ == sctpASSOCCHANGE && (state == sctpCOMMLOST || state == sctpSHUTDOWNCOMP || state == sctpCANTSTRASSOC) {
				a.end(fmt.Errorf("%w: association change %d", ErrLost, state))
				return
			}
			continue
		case n == 0:
			// The peer shut the association down (11.3).
			k.putBuf(buf)
			a.end(fmt.Errorf("%w: SHUTDOWN", ErrLost))
			return
		case flags&unix.MSG_EOR == 0:
			// More than this end's maximum chunk (section 9: "MUST
			// reject DDP Segments that are larger").
			k.putBuf(buf)
			a.log.Warnf("sctp: a message of more than %d octets: aborting the association", len(buf))
			k.abort()
			a.end(fmt.Errorf("%w: message larger than %d octets", ErrLost, len(buf)))
			return
		}
		stream, ppid, ok := k.rcvinfo()
		select {
		case <-k.drain:
			k.putBuf(buf)
			continue
		default:
		}
		if !ok {
			k.putBuf(buf)
			a.log.Warn("sctp: a message without SCTP_RCVINFO: aborting the association")
			k.abort()
			a.end(fmt.Errorf("%w: no SCTP_RCVINFO", ErrLost))
			return
		}
		a.deliver(stream, ppid, buf[:n])
	}
}

func (k *kernelBackend) open(uint16) error { return nil }

// sendmsg is the writers' RawConn.Write function.
func (k *kernelBackend) sendmsg(fd uintptr) bool {
	_, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&k.wmsg)), unix.MSG_NOSIGNAL)
	for e == unix.EINTR {
		_, _, e = unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&k.wmsg)), unix.MSG_NOSIGNAL)
	}
	if e == unix.EAGAIN {
		return false
	}
	k.werr = nil
	if e != 0 {
		k.werr = e
	}
	return true
}

// write sends bufs as one message: one unordered DATA chunk (section 10)
// with the PPID and the stream in SCTP_SNDINFO (RFC 6458 5.3.4).
func (k *kernelBackend) write(stream uint16, ppid uint32, bufs [][]byte) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.wiov = k.wiov[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		k.wiov = append(k.wiov, v)
	}
	if len(k.wiov) == 0 {
		return errors.New("sctp: empty message")
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&k.woob[0]))
	h.Level, h.Type = solSCTP, sctpCmsgSNDINFO
	h.SetLen(unix.CmsgLen(sctpSndinfoLen))
	d := k.woob[unix.CmsgLen(0):unix.CmsgSpace(sctpSndinfoLen)]
	clear(d)
	binary.NativeEndian.PutUint16(d[0:], stream)        // snd_sid
	binary.NativeEndian.PutUint16(d[2:], sctpUNORDERED) // snd_flags
	binary.BigEndian.PutUint32(d[4:], ppid)             // snd_ppid, network byte order
	k.wmsg = unix.Msghdr{Iov: &k.wiov[0], Control: &k.woob[0]}
	k.wmsg.SetIovlen(len(k.wiov))
	k.wmsg.SetControllen(unix.CmsgSpace(sctpSndinfoLen))
	// A write deadline bounds waiting for room, not a send that needs
	// none: the engine's stop sets a past deadline while the rest of a
	// batch whose first work requests SCTP already took may still be
	// going out, and over TCP that batch is one writev. So try at once,
	// and wait (deadline honoured) only when the socket is full.
	sent := false
	err := k.rc.Control(func(fd uintptr) { sent = k.sendmsg(fd) })
	if err == nil && !sent {
		err = k.rc.Write(k.wfn)
	}
	clear(k.wiov)
	k.wmsg.Iov = nil
	if err == nil {
		err = k.werr
	}
	if err != nil {
		return fmt.Errorf("sctp: sendmsg: %w", err)
	}
	return nil
}

// unacked bounds the stream's chunks not yet acknowledged by the
// association's: sstat_unackdata (sent, unacknowledged) and
// sstat_penddata (not yet sent) of SCTP_STATUS.
func (k *kernelBackend) unacked(uint16) int {
	var st [sctpStatusLen]byte
	if err := k.status(st[:]); err != nil {
		return 0
	}
	return int(binary.NativeEndian.Uint16(st[statusUnackdataOff:])) + int(binary.NativeEndian.Uint16(st[statusPenddataOff:]))
}

// ackNotify subscribes to SCTP_SENDER_DRY_EVENT (RFC 6458 6.1.10), which
// Linux sends at once when nothing is outstanding and otherwise when the
// last chunk is acknowledged; the reader passes it on and unsubscribes.
// (Waiting for all is more than section 10 asks, but the socket's send
// buffer keeps the sender far below 32767 chunks: this wait is a
// safeguard.)
func (k *kernelBackend) ackNotify(uint16) <-chan struct{} {
	select {
	case <-k.ackc: // a notification from before: stale
	default:
	}
	if err := k.senderDry(true); err != nil {
		return closedChan // asking again is all that is left
	}
	return k.ackc
}

func (k *kernelBackend) senderDry(on bool) error {
	ev := sctpEvent(sctpSENDERDRYEVENT)
	if !on {
		ev[6] = 0
	}
	var serr error
	err := k.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), solSCTP, sctpEVENT, string(ev))
	})
	if err != nil {
		return err
	}
	return serr
}

func (k *kernelBackend) maxUserData() int { return k.maxUD }
func (k *kernelBackend) streams() int     { return k.nstrm }
func (k *kernelBackend) inlineALI() bool  { return false }

// setWriteDeadline bounds the writes of every stream: they share the socket.
func (k *kernelBackend) setWriteDeadline(_ uint16, t time.Time) { k.f.SetWriteDeadline(t) }

// shutdown ends the association gracefully (11.3): SHUT_WR has SCTP send
// its SHUTDOWN once what was sent is acknowledged; the reader discards
// what the peer still sends until the SHUTDOWN's completion ends it.
func (k *kernelBackend) shutdown() error {
	k.dOnce.Do(func() { close(k.drain) })
	var err error
	k.rc.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_WR) })
	if err == nil {
		select {
		case <-k.rdone:
		case <-time.After(5 * time.Second):
			err = errors.New("sctp: SHUTDOWN not completed within 5 s")
		}
	}
	k.cOnce.Do(func() { k.f.Close() })
	return err
}

// abort ends the association with an ABORT: closing with a zero linger
// time (RFC 6458 8.1.4).
func (k *kernelBackend) abort() error {
	k.abortClose()
	return nil
}

func (k *kernelBackend) abortClose() {
	k.cOnce.Do(func() {
		k.rc.Control(func(fd uintptr) {
			unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		})
		k.f.Close()
	})
}

func (k *kernelBackend) localAddr() net.Addr  { return k.laddr }
func (k *kernelBackend) remoteAddr() net.Addr { return k.raddr }

// KernelListener accepts kernel SCTP associations on one listening
// one-to-one socket. The Adaptation Layer Indication of DDP goes in every
// INIT-ACK, and an association whose peer's indication is missing or
// another is aborted (7.1, 11.1).
type KernelListener struct {
	f     *os.File
	rc    syscall.RawConn
	addr  net.Addr
	cfg   Config
	assoc chan *Association
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// ListenKernel listens with kernel SCTP on addr (host:port). The endpoint
// is bound to the one address given; a wildcard binds every address of
// the host, which 7.2 advises against for DDP.
func ListenKernel(addr string, cfg Config) (Listener, error) {
	cfg = cfg.withDefaults()
	ap, err := resolve(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	sa, family := sockaddr(ap)
	fd, err := kernelSocket(family, cfg)
	if err != nil {
		return nil, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sctp: bind %s: %w", addr, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sctp: listen %s: %w", addr, err)
	}
	l := &KernelListener{cfg: cfg, assoc: make(chan *Association, 16), done: make(chan struct{})}
	if lsa, err := unix.Getsockname(fd); err == nil {
		l.addr = addrOf(lsa)
	}
	l.f = os.NewFile(uintptr(fd), "sctp-listener")
	if l.rc, err = l.f.SyscallConn(); err != nil {
		l.f.Close()
		return nil, err
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr returns the address listened on.
func (l *KernelListener) Addr() net.Addr { return l.addr }

func (l *KernelListener) acceptLoop() {
	defer l.wg.Done()
	for {
		var nfd int
		var aerr error
		err := l.rc.Read(func(fd uintptr) bool {
			// Linux's SCTP accept returns EINTR with a signal pending
			// (the runtime's preemption), even without blocking: retry.
			for {
				nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				if aerr != unix.EINTR {
					break
				}
			}
			return aerr != unix.EAGAIN
		})
		if err == nil {
			err = aerr
		}
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ECONNABORTED) {
				l.cfg.Log.WithError(err).Warn("sctp: accept")
				time.Sleep(10 * time.Millisecond)
				continue
			}
			l.cfg.Log.WithError(err).Warn("sctp: accept: the listener stops")
			return
		}
		l.wg.Add(1)
		go l.handshake(nfd)
	}
}

// handshake checks an accepted association's notifications (11.1) and
// hands it to Accept, or aborts it.
func (l *KernelListener) handshake(fd int) {
	defer l.wg.Done()
	k, err := newKernelBackend(fd)
	if err != nil {
		unix.Close(fd)
		return
	}
	// Linux queues the notifications before accept returns; the deadline
	// only guards against a kernel that does not.
	k.f.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := k.handshake(); err != nil {
		l.cfg.Log.WithError(err).Warn("sctp: association aborted")
		k.abortClose()
		return
	}
	k.f.SetReadDeadline(time.Time{})
	a := newAssociation(k, l.cfg)
	select {
	case l.assoc <- a:
	case <-l.done:
		a.Abort()
	}
}

// Accept returns the next association set up by a peer.
func (l *KernelListener) Accept(ctx context.Context) (*Association, error) {
	return acceptFrom(ctx, l.assoc, l.done)
}

// Close stops accepting and aborts the associations not yet accepted;
// those accepted go on.
func (l *KernelListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.f.Close()
	})
	l.wg.Wait()
	abortQueued(l.assoc)
	return nil
}
