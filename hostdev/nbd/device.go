package nbd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Options are how Attach sets a device up.
type Options struct {
	// Index is the device to use, /dev/nbdIndex; -1 lets the kernel
	// pick a free one.
	Index int
	// InFlight bounds the requests executing at once (the session's
	// queue depth).
	InFlight int
	// DeadConnTimeout is how long the kernel holds I/O for a new socket
	// after this end's died (NBD_ATTR_DEAD_CONN_TIMEOUT); 0: 30 s.
	DeadConnTimeout time.Duration
	// Backend names what is served (NBD_ATTR_BACKEND_IDENTIFIER,
	// /sys/block/nbdN/backend).
	Backend string
	Log     *log.Entry
}

// Device is a kernel NBD device served by this process over a socketpair:
// no TCP port, the kernel's end of the pair handed over with
// NBD_CMD_CONNECT. Requests carry no timeout: like the session under it,
// which holds I/O through a reconnection to the target, the device waits.
// When this end's socket fails, a new pair is handed over with
// NBD_CMD_RECONFIGURE while the kernel holds I/O for DeadConnTimeout.
type Device struct {
	Index int
	Path  string

	srv  *Server
	g    *genl
	opts Options
	log  *log.Entry

	mu      sync.Mutex
	conn    net.Conn
	closing bool
	done    chan struct{}
	err     error
}

// socketpair returns this end as a net.Conn (on the runtime's poller) and
// the kernel's end as a descriptor.
func socketpair() (net.Conn, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, os.NewSyscallError("socketpair", err)
	}
	f := os.NewFile(uintptr(fds[0]), "nbd-server")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, -1, err
	}
	return c, fds[1], nil
}

// Attach configures an NBD device for lun and serves it until Close,
// a disconnect (Disconnect, from any process) or ctx's end.
func Attach(ctx context.Context, lun *LUN, o Options) (*Device, error) {
	if o.DeadConnTimeout == 0 {
		o.DeadConnTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = log.NewEntry(log.StandardLogger())
	}
	g, err := openGenl()
	if err != nil {
		return nil, err
	}
	conn, theirs, err := socketpair()
	if err != nil {
		g.close()
		return nil, err
	}
	srv := NewServer(lun, o.InFlight, o.Log)
	idx, err := g.connect(ConnectConfig{
		Index:           o.Index,
		Size:            lun.Size(),
		BlockSize:       lun.BlockSize(),
		ServerFlags:     srv.Flags(),
		DeadConnTimeout: int((o.DeadConnTimeout + time.Second - 1) / time.Second),
		Backend:         o.Backend,
	}, theirs)
	unix.Close(theirs) // the kernel holds its own reference
	if err != nil {
		conn.Close()
		g.close()
		return nil, err
	}
	d := &Device{Index: idx, Path: fmt.Sprintf("/dev/nbd%d", idx), srv: srv, g: g, opts: o, log: o.Log, conn: conn, done: make(chan struct{})}
	go d.run(ctx)
	return d, nil
}

// Reattach serves device index again after the process that served it
// died: the kernel holds its I/O for the DeadConnTimeout the device was
// connected with, and takes a new socket with NBD_CMD_RECONFIGURE (o's
// Backend must be the one it was connected with). The new socket is
// offered until the kernel takes it, for up to o.DeadConnTimeout.
func Reattach(ctx context.Context, index int, lun *LUN, o Options) (*Device, error) {
	if o.DeadConnTimeout == 0 {
		o.DeadConnTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = log.NewEntry(log.StandardLogger())
	}
	if got, err := readSysSize(index); err == nil && got != lun.Size() {
		return nil, fmt.Errorf("nbd: /dev/nbd%d has %d octets, the LUN %d: not the same disk", index, got, lun.Size())
	}
	g, err := openGenl()
	if err != nil {
		return nil, err
	}
	d := &Device{Index: index, Path: fmt.Sprintf("/dev/nbd%d", index), srv: NewServer(lun, o.InFlight, o.Log), g: g, opts: o, log: o.Log, done: make(chan struct{})}
	if err := d.reconnect(ctx); err != nil {
		g.close()
		return nil, fmt.Errorf("nbd: %s: %w", d.Path, err)
	}
	go d.run(ctx)
	return d, nil
}

// readSysSize reads a device's size from sysfs.
func readSysSize(index int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/size", index))
	if err != nil {
		return 0, err
	}
	var sectors int64
	_, err = fmt.Sscan(string(b), &sectors)
	return sectors * 512, err
}

// run serves connections until the device is disconnected.
func (d *Device) run(ctx context.Context) {
	defer close(d.done)
	defer d.g.close()
	for {
		d.mu.Lock()
		conn := d.conn
		d.mu.Unlock()
		err := d.srv.Serve(ctx, conn)
		conn.Close()
		d.mu.Lock()
		closing := d.closing
		d.mu.Unlock()
		if errors.Is(err, ErrDisconnected) || closing || ctx.Err() != nil {
			d.log.Infof("%s: disconnected", d.Path)
			return
		}
		d.log.Warnf("%s: the connection failed (%v); handing the kernel a new one", d.Path, err)
		if err := d.reconnect(ctx); err != nil {
			d.err = err
			d.log.Errorf("%s: %v", d.Path, err)
			return
		}
	}
}

// reconnect hands the kernel a new socket with NBD_CMD_RECONFIGURE. The
// kernel takes it only once it has marked the old one dead, and says
// nothing when it does not take it; a socket it did not take reads end of
// file here as soon as its descriptor is closed, so the new one is tried
// until it stays open, for up to DeadConnTimeout.
func (d *Device) reconnect(ctx context.Context) error {
	deadline := time.Now().Add(d.opts.DeadConnTimeout)
	start := time.Now()
	for try, wait := 1, 10*time.Millisecond; ; try, wait = try+1, min(2*wait, time.Second) {
		conn, theirs, err := socketpair()
		if err != nil {
			return err
		}
		err = d.g.reconfigure(d.Index, theirs, d.opts.Backend)
		unix.Close(theirs)
		if err == nil {
			if err = peerClosed(conn); err == nil {
				d.mu.Lock()
				d.conn = conn
				d.mu.Unlock()
				d.log.Infof("%s: reconfigured with a new connection (try %d, %v)", d.Path, try, time.Since(start).Round(time.Millisecond))
				return nil
			}
		}
		conn.Close()
		d.log.Debugf("%s: reconfiguration, try %d: %v", d.Path, try, err)
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no new connection taken within %v (last: %v)", d.opts.DeadConnTimeout, err)
		}
		time.Sleep(wait)
	}
}

// peerClosed fails when the peer of conn has closed it: end of file with
// nothing queued. A socket the kernel holds is open and quiet.
func peerClosed(conn net.Conn) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	cerr := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN:
		case err != nil:
			perr = err
		case n == 0:
			perr = errors.New("the kernel did not take the socket")
		}
	})
	if cerr != nil {
		return cerr
	}
	return perr
}

// Done is closed once the device is no longer served: after a
// disconnect, Close, or a failed reconfiguration (Err says which).
func (d *Device) Done() <-chan struct{} { return d.done }

// Err is why serving ended: nil for a disconnect.
func (d *Device) Err() error {
	<-d.done
	return d.err
}

// Disconnect asks the kernel to disconnect the device (NBD_CMD_DISCONNECT:
// it sends NBD_CMD_DISC once what is in flight is answered, then drops
// the socket) and waits until it is no longer served. I/O on the device
// fails after it; the caller checks that nothing uses it.
func (d *Device) Disconnect(timeout time.Duration) error {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	g, err := openGenl()
	if err != nil {
		return err
	}
	defer g.close()
	if err := g.disconnect(d.Index); err != nil {
		return err
	}
	select {
	case <-d.done:
		return d.err
	case <-time.After(timeout):
		d.mu.Lock()
		d.conn.Close()
		d.mu.Unlock()
		<-d.done
		return fmt.Errorf("%s: not disconnected after %v; its connection was closed", d.Path, timeout)
	}
}

// Reconnect closes this end's connection as a failure would; the kernel
// marks it dead and holds I/O, and the device hands it a new one with
// NBD_CMD_RECONFIGURE. For tests, and for an operator who suspects a
// stuck connection.
func (d *Device) Reconnect() {
	d.mu.Lock()
	d.conn.Close()
	d.mu.Unlock()
}
