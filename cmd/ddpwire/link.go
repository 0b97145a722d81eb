package main

import (
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// link is one end of an MPA connection in Full Operation: it frames RDMAP
// Messages into FPDUs on send, and deframes and reports FPDUs on receive.
type link struct {
	name   string
	conn   net.Conn
	neg    mpa.Negotiated
	mulpdu int
	log    *printer

	mu     sync.Mutex // serialises senders
	framer *mpa.Framer
	iov    net.Buffers
	hdrs   [][ddp.UntaggedHeaderLen]byte
	sent   int // FPDUs sent
	octets int // stream octets sent
}

func newLink(name string, conn net.Conn, neg mpa.Negotiated, emss int, log *printer) (*link, error) {
	if emss == 0 {
		var err error
		if emss, err = socketEMSS(conn); err != nil {
			return nil, err
		}
	}
	return &link{
		name: name, conn: conn, neg: neg, log: log,
		mulpdu: mpa.MULPDU(emss, neg.TxMarkers),
		framer: mpa.NewFramer(0, neg.TxMarkers, neg.CRC),
	}, nil
}

// socketEMSS reads the connection's current effective MSS (TCP_MAXSEG).
func socketEMSS(conn net.Conn) (int, error) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var mss int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mss, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	}); err != nil {
		return 0, err
	}
	return mss, serr
}

// sendTagged sends an RDMAP Message of the tagged model (RDMA Write, RDMA
// Read Response) in as many DDP Segments as the MULPDU requires.
func (l *link) sendTagged(op rdmap.Opcode, stag uint32, to uint64, payload []byte) error {
	f, err := rdmap.TaggedFields(op, stag, to)
	if err != nil {
		return err
	}
	return l.send(ddp.TaggedHeaderLen, payload, func(b []byte, s ddp.Segment) {
		f.Last, f.TO = s.Last, to+uint64(s.Offset)
		f.Encode(b)
	})
}

// sendUntagged sends an RDMAP Message of the untagged model.
func (l *link) sendUntagged(op rdmap.Opcode, msn uint32, payload []byte) error {
	f, err := rdmap.UntaggedFields(op, msn, 0)
	if err != nil {
		return err
	}
	return l.send(ddp.UntaggedHeaderLen, payload, func(b []byte, s ddp.Segment) {
		f.Last, f.MO = s.Last, s.Offset
		f.Encode(b)
	})
}

// send segments one Message (RFC 5041 5.2), frames every segment and writes
// the whole Message with one writev.
func (l *link) send(hdrLen int, payload []byte, header func([]byte, ddp.Segment)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	sg, err := ddp.NewSegmenter(uint32(len(payload)), l.mulpdu, hdrLen)
	if err != nil {
		return err
	}
	l.framer.Reset()
	l.iov = l.iov[:0]
	if n := sg.Count(); cap(l.hdrs) < n {
		l.hdrs = make([][ddp.UntaggedHeaderLen]byte, n)
	}
	start := l.framer.Pos()
	for i := 0; ; i++ {
		s, ok := sg.Next()
		if !ok {
			break
		}
		h := l.hdrs[i][:hdrLen]
		header(h, s)
		if l.iov, err = l.framer.AppendFPDU(l.iov, h, payload[s.Offset:s.Offset+s.Len]); err != nil {
			return err
		}
		l.sent++
	}
	l.octets += int(l.framer.Pos() - start)
	_, err = l.iov.WriteTo(l.conn)
	return err
}

// receive deframes the stream from the peer and calls handle with each
// complete ULPDU, after printing it. It returns at the end of the stream, on
// an MPA error, or when handle returns false.
func (l *link) receive(peer string, handle func(ulpdu []byte) bool) error {
	d := mpa.NewDeframer(0, l.neg.RxMarkers, l.neg.CRC)
	buf := make([]byte, 256<<10)
	var ulpdu []byte
	var start uint32
	nfpdu := 0
	for {
		n, rerr := l.conn.Read(buf)
		for raw := buf[:n]; len(raw) > 0; {
			before := d.Pos()
			ev, data, k, err := d.Next(raw)
			raw = raw[k:]
			switch ev {
			case mpa.ULPDUStart:
				start = before
				ulpdu = ulpdu[:0]
			case mpa.ULPDUData:
				ulpdu = append(ulpdu, data...)
			case mpa.FPDUEnd:
				nfpdu++
				crc := "CRC ok"
				if !l.neg.CRC {
					crc = "no CRC"
				}
				if err != nil {
					crc = err.Error()
				}
				l.log.printf("%-9s <- %-9s FPDU %-3d @%#06x %5d octets, %s | %s",
					l.name, peer, nfpdu, start, d.Pos()-start, crc, describeULPDU(ulpdu))
				if err == nil && !handle(ulpdu) {
					return nil
				}
			}
			if err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// printer serialises the lines both ends print.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}
