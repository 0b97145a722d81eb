package sctp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/pion/logging"
	pion "github.com/pion/sctp"
)

// DefaultUDPMTU is the SCTP packet size of the userspace backend, and its
// most: pion/sctp v1.11.3 reads inbound packets into 8192-octet buffers
// (receiveMTU), so a larger packet would arrive cut short.
const DefaultUDPMTU = 8192

// udpBackend runs the association in userspace with pion/sctp v1.11.3 over
// a UDP socket (SCTP over UDP encapsulation in the manner of RFC 6951, on
// a port of our choosing). DATA chunks (no I-DATA interleaving), every one
// unordered. pion copies each message into chunks it allocates; the copies
// and allocations per I/O inside pion are not ours to avoid.
type udpBackend struct {
	pa     *pion.Association
	nc     net.Conn
	mtu    int
	nstrm  int
	mu     sync.Mutex
	strm   map[uint16]*udpStream
	a      *Association
	closed chan struct{}
	once   sync.Once
}

type udpStream struct {
	s     *pion.Stream
	sizes []int // sizes of the chunks written and not known acknowledged
	head  int
	n     int
	total uint64 // octets written
	wbuf  []byte // a chunk given in pieces, joined (its session's wmu held)
	ackc  chan struct{}
}

// pionLogs keeps pion quiet but for errors.
var pionLogs = func() logging.LoggerFactory {
	f := logging.NewDefaultLoggerFactory()
	f.DefaultLogLevel = logging.LogLevelError
	return f
}()

func pionOptions(nc net.Conn, cfg Config) []pion.AssociationOption {
	return []pion.AssociationOption{
		pion.WithNetConn(nc),
		pion.WithLoggerFactory(pionLogs),
		pion.WithMTU(uint32(cfg.MTU)),
		pion.WithMaxMessageSize(uint32(max(cfg.MTU, 64<<10))),
		// The receive window bounds the chunks in flight, and so how far
		// out of order one may arrive behind a lost one: no further than
		// the session can hold (half the association's buffers).
		pion.WithMaxReceiveBufferSize(uint32((cfg.Buffers/2 - 2) * MaxChunk(UserDataForMTU(cfg.MTU, 0)))),
		pion.WithEnableInterleaving(false),
	}
}

func clientOptions(nc net.Conn, cfg Config) []pion.ClientOption {
	var o []pion.ClientOption
	for _, x := range pionOptions(nc, cfg) {
		o = append(o, x)
	}
	return o
}

func serverOptions(nc net.Conn, cfg Config) []pion.ServerOption {
	var o []pion.ServerOption
	for _, x := range pionOptions(nc, cfg) {
		o = append(o, x)
	}
	return o
}

func udpConfig(cfg Config) Config {
	cfg = cfg.withDefaults()
	if cfg.MTU <= 0 || cfg.MTU > DefaultUDPMTU {
		cfg.MTU = DefaultUDPMTU
	}
	return cfg
}

// DialUDP sets up an association with the userspace SCTP endpoint at addr
// (host:port, over UDP).
func DialUDP(ctx context.Context, addr string, cfg Config) (*Association, error) {
	cfg = udpConfig(cfg)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	setUDPBuffers(nc)
	stop := context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
	pa, err := pion.ClientContext(ctx, clientOptions(nc, cfg)...)
	stop()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("sctp: association with %s: %w", addr, err)
	}
	nc.SetReadDeadline(time.Time{})
	return newAssociation(newUDPBackend(pa, nc, cfg), cfg), nil
}

func newUDPBackend(pa *pion.Association, nc net.Conn, cfg Config) *udpBackend {
	return &udpBackend{pa: pa, nc: nc, mtu: cfg.MTU, nstrm: cfg.Streams, strm: make(map[uint16]*udpStream), closed: make(chan struct{})}
}

func (b *udpBackend) start(a *Association) {
	b.a = a
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			s, err := b.pa.AcceptStream()
			if err != nil {
				a.end(fmt.Errorf("%w: %v", ErrLost, err))
				return
			}
			if int(s.StreamIdentifier()) >= b.nstrm {
				// Outside the streams this end offers (section 8).
				a.log.Warnf("sctp: chunk on stream %d of %d: aborting the association", s.StreamIdentifier(), b.nstrm)
				b.abort()
				a.end(fmt.Errorf("%w: stream %d beyond %d", ErrLost, s.StreamIdentifier(), b.nstrm))
				return
			}
			b.add(s)
		}
	}()
}

// ErrLost is an association that ended without a graceful shutdown by
// this end.
var ErrLost = errors.New("sctp: association lost")

// add registers a stream and runs its reader.
func (b *udpBackend) add(s *pion.Stream) *udpStream {
	b.mu.Lock()
	defer b.mu.Unlock()
	if us := b.strm[s.StreamIdentifier()]; us != nil {
		return us
	}
	s.SetReliabilityParams(true, pion.ReliabilityTypeReliable, 0)
	us := &udpStream{s: s, sizes: make([]int, MaxInFlight+1), ackc: make(chan struct{}, 1)}
	s.OnBufferedAmountLow(func() {
		select {
		case us.ackc <- struct{}{}:
		default:
		}
	})
	b.strm[s.StreamIdentifier()] = us
	a := b.a
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			buf := a.getBuf()
			if buf == nil {
				return
			}
			n, ppid, err := s.ReadSCTP(buf)
			if err != nil {
				a.putBuf(buf)
				if errors.Is(err, io.ErrShortBuffer) {
					a.log.Warnf("sctp: a chunk of more than %d octets on stream %d: aborting the association", len(buf), s.StreamIdentifier())
					b.abort()
				}
				a.end(fmt.Errorf("%w: %v", ErrLost, err))
				return
			}
			a.deliver(s.StreamIdentifier(), uint32(ppid), buf[:n])
		}
	}()
	return us
}

func (b *udpBackend) open(stream uint16) error {
	s, err := b.pa.OpenStream(stream, pion.PayloadProtocolIdentifier(PPIDSegment))
	if err != nil {
		return err
	}
	b.add(s)
	return nil
}

func (b *udpBackend) stream(id uint16) (*udpStream, error) {
	b.mu.Lock()
	us := b.strm[id]
	b.mu.Unlock()
	if us != nil {
		return us, nil
	}
	if err := b.open(id); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.strm[id], nil
}

// write joins the chunk into one buffer (pion takes a single slice, and
// copies it again into its chunks).
func (b *udpBackend) write(stream uint16, ppid uint32, bufs [][]byte) error {
	us, err := b.stream(stream)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range bufs {
		n += len(p)
	}
	// pion copies the message into the chunks it makes (Stream.packetize),
	// so the joined copy is reused: one buffer per stream, whose writes
	// its session serializes.
	msg := bufs[0]
	if len(bufs) > 1 {
		us.wbuf = us.wbuf[:0]
		for _, p := range bufs {
			us.wbuf = append(us.wbuf, p...)
		}
		msg = us.wbuf
	}
	if _, err := us.s.WriteSCTP(msg, pion.PayloadProtocolIdentifier(ppid)); err != nil {
		return err
	}
	b.mu.Lock()
	us.sizes[(us.head+us.n)%len(us.sizes)] = n
	us.n++
	if us.n == len(us.sizes) {
		us.head = (us.head + 1) % len(us.sizes)
		us.n--
	}
	us.total += uint64(n)
	b.mu.Unlock()
	return nil
}

// unacked counts the chunks written whose octets pion has not yet released:
// BufferedAmount is what is queued or in flight unacknowledged, and the
// oldest chunks are the ones released first.
func (b *udpBackend) unacked(stream uint16) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	us := b.strm[stream]
	if us == nil {
		return 0
	}
	buffered := us.s.BufferedAmount()
	released := us.total - buffered
	for us.n > 0 && uint64(us.sizes[us.head]) <= released {
		released -= uint64(us.sizes[us.head])
		us.total -= uint64(us.sizes[us.head])
		us.head = (us.head + 1) % len(us.sizes)
		us.n--
	}
	return us.n
}

// ackNotify sets the stream's low threshold one octet under what pion
// holds now: pion calls OnBufferedAmountLow when an acknowledged chunk
// takes the amount across it.
func (b *udpBackend) ackNotify(stream uint16) <-chan struct{} {
	b.mu.Lock()
	us := b.strm[stream]
	b.mu.Unlock()
	if us == nil {
		return closedChan
	}
	select {
	case <-us.ackc: // a notification from before: stale
	default:
	}
	us.s.SetBufferedAmountLowThreshold(max(us.s.BufferedAmount(), 1) - 1)
	return us.ackc
}

func (b *udpBackend) maxUserData() int {
	// pion fragments messages over this (maxPayloadSizeForMTU).
	return UserDataForMTU(b.mtu, 0)
}

func (b *udpBackend) streams() int    { return b.nstrm }
func (b *udpBackend) inlineALI() bool { return true }

func (b *udpBackend) setWriteDeadline(stream uint16, t time.Time) {
	if us, err := b.stream(stream); err == nil {
		us.s.SetWriteDeadline(t)
	}
}

func (b *udpBackend) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.pa.Shutdown(ctx)
	b.pa.Close()
	b.nc.Close()
	return err
}

func (b *udpBackend) abort() error {
	b.once.Do(func() {
		b.pa.Abort("DDP/SCTP: abortive close")
		b.pa.Close()
		b.nc.Close()
	})
	return nil
}

func (b *udpBackend) localAddr() net.Addr  { return b.nc.LocalAddr() }
func (b *udpBackend) remoteAddr() net.Addr { return b.nc.RemoteAddr() }

// UDPListener accepts userspace SCTP associations on one UDP socket,
// demultiplexing datagrams by source address.
type UDPListener struct {
	pc    *net.UDPConn
	cfg   Config
	mu    sync.Mutex
	conns map[netip.AddrPort]*muxConn
	assoc chan *Association
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup // handshakes in progress
	free  chan []byte
}

// ListenUDP listens for userspace SCTP associations on addr.
func ListenUDP(addr string, cfg Config) (*UDPListener, error) {
	cfg = udpConfig(cfg)
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	setUDPBuffers(pc)
	l := &UDPListener{pc: pc, cfg: cfg, conns: make(map[netip.AddrPort]*muxConn),
		assoc: make(chan *Association, 16), done: make(chan struct{}), free: make(chan []byte, 64)}
	go l.readLoop()
	return l, nil
}

// Addr returns the UDP address listened on.
func (l *UDPListener) Addr() net.Addr { return l.pc.LocalAddr() }

// Accept returns the next association set up by a peer.
func (l *UDPListener) Accept(ctx context.Context) (*Association, error) {
	return acceptFrom(ctx, l.assoc, l.done)
}

// Close stops accepting; associations already accepted go on until they
// end, and the socket closes with the last of them.
func (l *UDPListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		if len(l.conns) == 0 {
			l.pc.Close()
		}
		l.mu.Unlock()
	})
	l.wg.Wait()
	abortQueued(l.assoc)
	return nil
}

func (l *UDPListener) getBuf() []byte {
	select {
	case b := <-l.free:
		return b
	default:
		return make([]byte, 65536)
	}
}

func (l *UDPListener) putBuf(b []byte) {
	select {
	case l.free <- b[:cap(b)]:
	default:
	}
}

// readLoop runs until the socket closes: at Close, or after it once the
// last association accepted has ended.
func (l *UDPListener) readLoop() {
	for {
		buf := l.getBuf()
		n, from, err := l.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			l.mu.Lock()
			for _, c := range l.conns {
				c.shut()
			}
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		c := l.conns[from]
		if c == nil {
			// Only an INIT (chunk type 1 after the 12-octet common
			// header) sets up an association; a stray chunk of one that
			// ended is dropped.
			select {
			case <-l.done:
				l.mu.Unlock()
				l.putBuf(buf)
				continue
			default:
			}
			if n < 13 || buf[12] != 1 {
				l.mu.Unlock()
				l.putBuf(buf)
				continue
			}
			c = newMuxConn(l, from)
			l.conns[from] = c
			l.wg.Add(1)
			go l.handshake(c)
		}
		l.mu.Unlock()
		select {
		case c.in <- buf[:n]:
		default:
			l.putBuf(buf) // full: dropped, as the network may; SCTP retransmits
		}
	}
}

// handshake runs the server side of the association setup.
func (l *UDPListener) handshake(c *muxConn) {
	defer l.wg.Done()
	t := time.AfterFunc(10*time.Second, func() { c.Close() })
	pa, err := pion.ServerWithOptions(serverOptions(c, l.cfg)...)
	if !t.Stop() || err != nil {
		if pa != nil {
			pa.Close()
		}
		c.Close()
		return
	}
	a := newAssociation(newUDPBackend(pa, c, l.cfg), l.cfg)
	select {
	case l.assoc <- a:
	case <-l.done:
		a.Abort()
	}
}

func (l *UDPListener) remove(c *muxConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[c.raddr] == c {
		delete(l.conns, c.raddr)
	}
	select {
	case <-l.done:
		if len(l.conns) == 0 {
			l.pc.Close()
		}
	default:
	}
}

// muxConn is one peer's datagrams of a UDPListener, as the net.Conn pion
// runs an association over.
type muxConn struct {
	l      *UDPListener
	raddr  netip.AddrPort
	in     chan []byte
	closed chan struct{}
	once   sync.Once

	dmu    sync.Mutex
	rdl    chan struct{} // closed when the read deadline passes
	rtimer *time.Timer
}

func newMuxConn(l *UDPListener, raddr netip.AddrPort) *muxConn {
	return &muxConn{l: l, raddr: raddr, in: make(chan []byte, 1024), closed: make(chan struct{}), rdl: make(chan struct{})}
}

func (c *muxConn) Read(p []byte) (int, error) {
	c.dmu.Lock()
	dl := c.rdl
	c.dmu.Unlock()
	select {
	case b := <-c.in:
		n := copy(p, b)
		c.l.putBuf(b)
		return n, nil
	case <-c.closed:
		return 0, net.ErrClosed
	case <-dl:
		return 0, os.ErrDeadlineExceeded
	}
}

func (c *muxConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	return c.l.pc.WriteToUDPAddrPort(p, c.raddr)
}

// shut ends reads (the listener's socket is gone).
func (c *muxConn) shut() { c.once.Do(func() { close(c.closed) }) }

func (c *muxConn) Close() error {
	c.shut()
	c.l.remove(c)
	return nil
}

func (c *muxConn) LocalAddr() net.Addr  { return c.l.pc.LocalAddr() }
func (c *muxConn) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(c.raddr) }

func (c *muxConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *muxConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.rtimer != nil {
		c.rtimer.Stop()
		c.rtimer = nil
	}
	ch := make(chan struct{})
	switch {
	case t.IsZero():
	case !time.Now().Before(t):
		close(ch)
	default:
		c.rtimer = time.AfterFunc(time.Until(t), func() { close(ch) })
	}
	c.rdl = ch
	return nil
}

func (c *muxConn) SetWriteDeadline(time.Time) error { return nil }

// setUDPBuffers asks for socket buffers that hold a receive window of
// packets: a datagram dropped for want of room costs a retransmission.
func setUDPBuffers(c net.Conn) {
	if u, ok := c.(*net.UDPConn); ok {
		u.SetReadBuffer(4 << 20)
		u.SetWriteBuffer(4 << 20)
	}
}
