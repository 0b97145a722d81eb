package iwarp

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// TestFPDUTrailersStayInSegments captures, in a network namespace of its
// own, the TCP segments of RDMA Writes of 1 to 64 octets, each followed by
// one of 1 MiB, and checks that no FPDU's PAD and CRC are split between two
// segments. RFC 5044 5.1 asks senders to start segments with FPDUs; Linux's
// siw, as a peer, reads a CRC split between segments wrongly and fails the
// connection (docs/performance.md, fourteenth session). The sender keeps
// FPDUs whole in segments by sizing them to EMSS stretches counted from
// each write's start, and by ending each write with MSG_EOR, so that TCP
// starts a segment with the next one.
func TestFPDUTrailersStayInSegments(t *testing.T) {
	if testNet != "tcp" {
		t.Skip("segments are TCP's")
	}
	// The namespace is this goroutine's thread's; the thread is never
	// unlocked, so it ends with the test.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Skipf("no network namespace of its own (%v): capturing segments needs root", err)
	}
	upLoopback(t)
	for name, v := range map[string]string{"tcp_rmem": "4096 8388608 16777216", "tcp_wmem": "4096 8388608 16777216"} {
		if err := os.WriteFile("/proc/sys/net/ipv4/"+name, []byte(v), 0); err != nil {
			t.Fatalf("setting the namespace's %s: %v", name, err)
		}
	}
	cap := capture(t)

	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	m, ok := ini.qp.conn.l.(*mpaLLP)
	if !ok {
		t.Fatalf("the QP's lower layer is a %T, not MPA", ini.qp.conn.l)
	}
	// Writes the socket took in parts, as stream offsets: TCP may send
	// the first part's last segment before the rest comes (corking
	// keeps it only while the peer's window is shut), so their FPDUs
	// may be cut anywhere, as RFC 5044 5.1 allows.
	var cutMu sync.Mutex
	var cuts [][2]int
	m.s.cuts = &writeCuts{report: func(start, end uint64) {
		cutMu.Lock()
		cuts = append(cuts, [2]int{int(start), int(end)})
		cutMu.Unlock()
	}}
	for i := range ini.buf[:4<<20] {
		ini.buf[i] = byte(i*131 + i>>10)
	}
	// Each round waits for a Send behind its Writes to arrive, so that the
	// peer's window (sized by the namespace's tcp_rmem) never ends inside
	// a round's octets: where it does, TCP sends up to its last octet.
	const big = 1 << 20
	id := uint64(0)
	for small := 1; small <= 64; small++ {
		if err := resp.qp.PostRecv(&RecvWR{ID: uint64(small), SGL: []SGE{resp.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{small, big} {
			id++
			if err := ini.qp.PostSend(&SendWR{ID: id, Op: OpWrite, SGL: []SGE{ini.sge(small, n)},
				RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 4096 + uint64(small)}); err != nil {
				t.Fatal(err)
			}
		}
		id++
		if err := ini.qp.PostSend(&SendWR{ID: id, Op: OpSend, SGL: []SGE{ini.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		ini.expect(ini.scq, id-2, WCWrite, StatusSuccess, uint32(small))
		ini.expect(ini.scq, id-1, WCWrite, StatusSuccess, big)
		ini.expect(ini.scq, id, WCSend, StatusSuccess, 64)
		resp.expect(resp.rcq, uint64(small), WCRecv, StatusSuccess, 64)
	}

	segs := cap.stop(t)
	stream, starts, edges := initiatorStream(t, segs, m)
	cutMu.Lock()
	defer cutMu.Unlock()
	fpdus, split, allowed := checkTrailers(t, stream, starts, cuts, edges)
	t.Logf("%d octets in %d segments, %d FPDUs; %d writes taken in parts; %d trailers split where TCP may cut",
		len(stream), len(starts), fpdus, len(cuts), allowed)
	if want := 64 * big / loopMTU; fpdus < want {
		t.Fatalf("found %d FPDUs in the capture, want at least %d", fpdus, want)
	}
	if split > 0 {
		t.Errorf("%d FPDUs have their PAD and CRC split between two TCP segments, in writes taken whole and not at the end of the peer's window", split)
	}
}

// loopMTU is lo's MTU in the test's namespace: an Ethernet-like one, whose
// EMSS (1451 with TCP timestamps) is not a multiple of 4, so that FPDUs
// cannot fill a stretch to its last octet.
const loopMTU = 1503

// upLoopback brings up lo in the thread's network namespace.
func upLoopback(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint32(loopMTU)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		t.Fatalf("setting lo's MTU: %v", err)
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("bringing up lo: %v", err)
	}
}

// segCapture reads the IPv4 packets lo receives from a packet socket: on
// lo they are the segments TCP sent, as sent.
type segCapture struct {
	fd       int
	stopping atomic.Bool
	wg       sync.WaitGroup
	segs     [][]byte
	err      error
}

func capture(t *testing.T) *segCapture {
	proto := htons(unix.ETH_P_IP)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		t.Skipf("no packet socket (%v)", err)
	}
	c := &segCapture{fd: fd}
	t.Cleanup(func() { unix.Close(fd) })
	lo, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, lo); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: int(lo.Uint32())}); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20)
	// Reads give up after a while without packets, so that the reader
	// sees stop's word once the queue is empty.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		t.Fatal(err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		buf := make([]byte, 1<<17)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			switch {
			case err == nil:
				c.segs = append(c.segs, append([]byte(nil), buf[:n]...))
			case errors.Is(err, unix.EAGAIN) && c.stopping.Load():
				return
			case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			default:
				c.err = err
				return
			}
		}
	}()
	return c
}

// stop ends the capture once the reader has emptied the socket's queue,
// and checks that the kernel dropped nothing. Everything sent has been
// queued: a packet socket gets a packet before TCP does, and the caller
// saw the last of them received.
func (c *segCapture) stop(t *testing.T) [][]byte {
	c.stopping.Store(true)
	c.wg.Wait()
	if c.err != nil {
		t.Fatal(c.err)
	}
	var st unix.TpacketStats
	l := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(c.fd), unix.SOL_PACKET, unix.PACKET_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		t.Fatalf("PACKET_STATISTICS: %v", e)
	}
	if st.Drops > 0 {
		t.Fatalf("the packet socket dropped %d of %d packets", st.Drops, st.Packets)
	}
	return c.segs
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// initiatorStream reassembles the TCP payload the initiator's QP sent from
// the captured IPv4 packets, with the stream offset of each segment. The
// capture may hold them out of order (lo hands packets to the receive path
// on the CPU that sent them).
//
// edges are the stream offsets where the peer's advertised window ended
// (its ACKs' acknowledgment number plus window, scaled): TCP may end a
// segment there at any octet (RFC 5044 5.1).
func initiatorStream(t *testing.T, pkts [][]byte, m *mpaLLP) (stream []byte, starts []int, edges map[int]bool) {
	port := uint16(m.s.tc.LocalAddr().(*net.TCPAddr).Port)
	type seg struct {
		seq     uint32
		payload []byte
	}
	var segs []seg
	var isn uint32
	var acks [][2]uint32 // the peer's acknowledgment number and window
	wscale := uint(0)
	for _, p := range pkts {
		if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
			continue
		}
		ihl, total := int(p[0]&15)*4, int(binary.BigEndian.Uint16(p[2:]))
		tcp := p[ihl:total]
		doff := int(tcp[12]>>4) * 4
		if binary.BigEndian.Uint16(tcp[2:]) == port { // the peer's
			if tcp[13]&0x02 != 0 {
				wscale = windowScale(tcp[20:doff])
			} else if tcp[13]&0x10 != 0 {
				acks = append(acks, [2]uint32{binary.BigEndian.Uint32(tcp[8:]), uint32(binary.BigEndian.Uint16(tcp[14:]))})
			}
			continue
		}
		if binary.BigEndian.Uint16(tcp) != port {
			continue
		}
		seq := binary.BigEndian.Uint32(tcp[4:])
		if tcp[13]&0x02 != 0 { // SYN
			isn = seq
			continue
		}
		if payload := tcp[doff:]; len(payload) > 0 {
			segs = append(segs, seg{seq, payload})
		}
	}
	edges = make(map[int]bool)
	for _, a := range acks {
		edges[int(a[0]-isn-1)+int(a[1]<<wscale)] = true
	}
	// A retransmission, which TCP may cut anew (RFC 5044 A.1 allows for
	// that), fills in octets but its cuts are not counted: it is one that
	// starts inside octets captured before it.
	retx := make([]bool, len(segs))
	for i, s := range segs {
		for _, e := range segs[:i] {
			if s.seq-e.seq < uint32(len(e.payload)) {
				retx[i] = true
				break
			}
		}
	}
	order := make([]int, len(segs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return segs[order[i]].seq-isn < segs[order[j]].seq-isn })
	for _, i := range order {
		s := segs[i]
		off := int(s.seq - isn - 1)
		if off > len(stream) {
			t.Fatalf("the capture misses octets %d to %d of the stream", len(stream), off)
		}
		if !retx[i] {
			starts = append(starts, off)
		}
		if end := off + len(s.payload); end > len(stream) {
			stream = append(stream, s.payload[len(stream)-off:]...)
		}
	}
	sort.Ints(starts)
	return stream, starts, edges
}

// windowScale returns the shift of a SYN's Window Scale option (RFC 7323
// 2.2) among opts, or 0.
func windowScale(opts []byte) uint {
	for i := 0; i < len(opts); {
		switch kind := opts[i]; {
		case kind == 0:
			return 0
		case kind == 1:
			i++
		case i+1 >= len(opts) || opts[i+1] < 2:
			return 0
		case kind == 3 && opts[i+1] == 3 && i+2 < len(opts):
			return uint(opts[i+2])
		default:
			i += int(opts[i+1])
		}
	}
	return 0
}

// checkTrailers walks the FPDUs after the MPA Request frame, checks their
// CRCs (so that the walk is known to follow the stream), and counts those
// whose PAD and CRC a segment start falls inside: split, less the allowed
// ones, which lie in a write of cuts or whose segment starts at a window
// edge.
func checkTrailers(t *testing.T, stream []byte, starts []int, cuts [][2]int, edges map[int]bool) (fpdus, split, allowed int) {
	const req = "MPA ID Req Frame"
	if len(stream) < 20 || string(stream[:16]) != req {
		t.Fatalf("the initiator's stream does not start with an MPA Request frame: %q", stream[:min(len(stream), 40)])
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	pos := 20 + int(binary.BigEndian.Uint16(stream[18:]))
	for pos < len(stream) {
		ulen := int(binary.BigEndian.Uint16(stream[pos:]))
		pad := (4 - (mpa.LengthSize+ulen)%4) % 4
		end := pos + mpa.LengthSize + ulen + pad + mpa.CRCSize
		if end > len(stream) {
			t.Fatalf("the stream ends inside an FPDU at %d", pos)
		}
		if got, want := binary.LittleEndian.Uint32(stream[end-mpa.CRCSize:]), crc32.Checksum(stream[pos:end-mpa.CRCSize], castagnoli); got != want {
			t.Fatalf("FPDU at %d: CRC %08x, want %08x", pos, got, want)
		}
		trailer := end - mpa.CRCSize - pad
		if i := sort.SearchInts(starts, trailer+1); i < len(starts) && starts[i] < end {
			cut := edges[starts[i]]
			for _, c := range cuts {
				cut = cut || (pos >= c[0] && end <= c[1])
			}
			if cut {
				allowed++
			} else if split++; split <= 5 {
				t.Logf("FPDU at %d, %d octets: a segment starts %d octets before its end", pos, end-pos, end-starts[i])
			}
		}
		fpdus++
		pos = end
	}
	return fpdus, split, allowed
}
