package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel NBD client's generic netlink interface
// (include/uapi/linux/nbd-netlink.h), spoken with golang.org/x/sys/unix.
const (
	genlFamily  = "nbd"
	genlVersion = 1

	cmdConnect     = 1
	cmdDisconnect  = 2
	cmdReconfigure = 3

	attrIndex           = 1 // u32
	attrSizeBytes       = 2 // u64
	attrBlockSizeBytes  = 3 // u64
	attrTimeout         = 4 // u64, seconds
	attrServerFlags     = 5 // u64
	attrClientFlags     = 6 // u64
	attrSockets         = 7 // nested NBD_SOCK_ITEMs
	attrDeadConnTimeout = 8 // u64, seconds
	attrBackend         = 10

	sockItem = 1 // nested
	sockFD   = 1 // u32

	// ClientFlagDestroyOnDisconnect frees the device's index on
	// disconnect; ClientFlagDisconnectOnClose disconnects when the
	// device's last opener closes it.
	ClientFlagDestroyOnDisconnect = 1 << 0
	ClientFlagDisconnectOnClose   = 1 << 1
)

// ErrNoNBD is returned when the kernel has no nbd generic netlink family
// (nbd.ko is not loaded).
var ErrNoNBD = errors.New("nbd: the kernel has no NBD netlink family (is nbd.ko loaded?)")

// ConnectConfig is what NBD_CMD_CONNECT tells the kernel.
type ConnectConfig struct {
	Index           int // the device, /dev/nbdIndex; -1: the kernel picks a free one
	Size            int64
	BlockSize       int
	ServerFlags     uint64
	ClientFlags     uint64
	Timeout         int // seconds; 0: requests wait for a reply however long it takes
	DeadConnTimeout int // seconds the kernel holds I/O for a reconfiguration after the socket dies
	Backend         string
}

// genl is a generic netlink socket with the nbd family resolved.
type genl struct {
	fd     int
	family uint16
}

var seq atomic.Uint32

func openGenl() (*genl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK)", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind(AF_NETLINK)", err)
	}
	g := &genl{fd: fd}
	var a attrs
	a.str(unix.CTRL_ATTR_FAMILY_NAME, genlFamily)
	msgs, err := g.request(unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, 1, a.b)
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrNoNBD
		}
		return nil, fmt.Errorf("nbd: resolving the netlink family: %w", err)
	}
	for _, m := range msgs {
		if v, ok := findAttr(m, unix.CTRL_ATTR_FAMILY_ID); ok && len(v) >= 2 {
			g.family = binary.NativeEndian.Uint16(v)
		}
	}
	if g.family == 0 {
		unix.Close(fd)
		return nil, ErrNoNBD
	}
	return g, nil
}

func (g *genl) close() { unix.Close(g.fd) }

// request sends one generic netlink request with an acknowledgment asked
// for and returns the attributes of the data messages that answered it
// before the acknowledgment.
func (g *genl) request(family uint16, cmd, version uint8, payload []byte) ([][]byte, error) {
	s := seq.Add(1)
	msg := make([]byte, unix.NLMSG_HDRLEN+unix.GENL_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], family)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], s)
	msg[unix.NLMSG_HDRLEN] = cmd
	msg[unix.NLMSG_HDRLEN+1] = version
	copy(msg[unix.NLMSG_HDRLEN+unix.GENL_HDRLEN:], payload)
	if err := unix.Sendto(g.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto(netlink)", err)
	}
	var out [][]byte
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(g.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("recvfrom(netlink)", err)
		}
		b := buf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, fmt.Errorf("nbd: netlink message of %d octets in %d", l, len(b))
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			mseq := binary.NativeEndian.Uint32(b[8:])
			body := b[unix.NLMSG_HDRLEN:l]
			b = b[min(nlAlign(l), len(b)):]
			if mseq != s {
				continue
			}
			switch typ {
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return nil, errors.New("nbd: short netlink error message")
				}
				if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
					return out, syscall.Errno(-code)
				}
				return out, nil // the acknowledgment
			case unix.NLMSG_DONE:
				return out, nil
			default:
				if len(body) >= unix.GENL_HDRLEN {
					out = append(out, append([]byte(nil), body[unix.GENL_HDRLEN:]...)) // buf is read into again
				}
			}
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// attrs builds netlink attributes.
type attrs struct{ b []byte }

func (a *attrs) put(typ uint16, v []byte) {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	a.b = append(a.b, h[:]...)
	a.b = append(a.b, v...)
	for len(a.b)%4 != 0 {
		a.b = append(a.b, 0)
	}
}

func (a *attrs) u32(typ uint16, v uint32) {
	a.put(typ, binary.NativeEndian.AppendUint32(nil, v))
}

func (a *attrs) u64(typ uint16, v uint64) {
	a.put(typ, binary.NativeEndian.AppendUint64(nil, v))
}

func (a *attrs) str(typ uint16, v string) { a.put(typ, append([]byte(v), 0)) }

// sockets is NBD_ATTR_SOCKETS with one socket.
func (a *attrs) sockets(fd int) {
	var fdAttr, item attrs
	fdAttr.u32(sockFD, uint32(fd))
	item.put(sockItem|unix.NLA_F_NESTED, fdAttr.b)
	a.put(attrSockets|unix.NLA_F_NESTED, item.b)
}

// findAttr finds a top-level attribute.
func findAttr(b []byte, typ uint16) ([]byte, bool) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return nil, false
		}
		if t == typ {
			return b[4:l], true
		}
		b = b[min(nlAlign(l), len(b)):]
	}
	return nil, false
}

// connect configures a device with one socket and returns its index.
func (g *genl) connect(c ConnectConfig, fd int) (int, error) {
	var a attrs
	if c.Index >= 0 {
		a.u32(attrIndex, uint32(c.Index))
	}
	a.u64(attrSizeBytes, uint64(c.Size))
	a.u64(attrBlockSizeBytes, uint64(c.BlockSize))
	a.u64(attrServerFlags, c.ServerFlags)
	if c.ClientFlags != 0 {
		a.u64(attrClientFlags, c.ClientFlags)
	}
	if c.Timeout > 0 {
		a.u64(attrTimeout, uint64(c.Timeout))
	}
	if c.DeadConnTimeout > 0 {
		a.u64(attrDeadConnTimeout, uint64(c.DeadConnTimeout))
	}
	if c.Backend != "" {
		a.str(attrBackend, c.Backend)
	}
	a.sockets(fd)
	msgs, err := g.request(g.family, cmdConnect, genlVersion, a.b)
	if err != nil {
		return -1, fmt.Errorf("nbd: NBD_CMD_CONNECT: %w", err)
	}
	for _, m := range msgs {
		if v, ok := findAttr(m, attrIndex); ok && len(v) >= 4 {
			return int(binary.NativeEndian.Uint32(v)), nil
		}
	}
	if c.Index >= 0 {
		return c.Index, nil
	}
	return -1, errors.New("nbd: NBD_CMD_CONNECT answered without the device's index")
}

// reconfigure hands a device whose socket died a new one; backend must
// be what the device was connected with (the kernel checks it).
func (g *genl) reconfigure(index, fd int, backend string) error {
	var a attrs
	a.u32(attrIndex, uint32(index))
	if backend != "" {
		a.str(attrBackend, backend)
	}
	a.sockets(fd)
	if _, err := g.request(g.family, cmdReconfigure, genlVersion, a.b); err != nil {
		return fmt.Errorf("nbd: NBD_CMD_RECONFIGURE of nbd%d: %w", index, err)
	}
	return nil
}

// disconnect asks the kernel to send NBD_CMD_DISC and drop the device's
// sockets.
func (g *genl) disconnect(index int) error {
	var a attrs
	a.u32(attrIndex, uint32(index))
	if _, err := g.request(g.family, cmdDisconnect, genlVersion, a.b); err != nil {
		return fmt.Errorf("nbd: NBD_CMD_DISCONNECT of nbd%d: %w", index, err)
	}
	return nil
}

// Disconnect disconnects /dev/nbdIndex, whoever serves it: the kernel
// sends the server NBD_CMD_DISC and closes its socket.
func Disconnect(index int) error {
	g, err := openGenl()
	if err != nil {
		return err
	}
	defer g.close()
	return g.disconnect(index)
}

// Available says whether the kernel has the NBD client (nbd.ko loaded).
func Available() error {
	g, err := openGenl()
	if err != nil {
		return err
	}
	g.close()
	return nil
}
