package tcpconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// chunkConn is a net.Conn whose reads return the stream in pieces of
// pseudo-random sizes, as a socket returns what has come.
type chunkConn struct {
	net.Conn // nil: only Read is used
	data     []byte
	rng      *rand.Rand
	max      int
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(c.data), 1+c.rng.IntN(c.max))
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

// refPDU is what the reference parser made of one PDU: its BHS and data,
// or how it failed.
type refPDU struct {
	bhs, data []byte
	err       error
}

// errKind sorts errors into the end of the stream between PDUs, inside
// one, and everything else (a bad digest, opcode, length).
func errKind(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	return "invalid"
}

// reference parses stream with no read-ahead: RFC 7143 section 11.1's
// layout, read field by field.
func reference(stream []byte, hd, dd bool, maxSeg int) []refPDU {
	var out []refPDU
	r := bytes.NewReader(stream)
	get := func(n int) ([]byte, error) {
		b := make([]byte, n)
		k, err := io.ReadFull(r, b)
		if err == io.EOF && k == 0 && n > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return b, err
	}
	for {
		if r.Len() == 0 {
			return append(out, refPDU{err: io.EOF})
		}
		bhs, err := get(iscsi.BHSLen)
		if err != nil {
			return append(out, refPDU{err: err})
		}
		if hd {
			d, err := get(iscsi.DigestLen)
			if err != nil {
				return append(out, refPDU{err: err})
			}
			if iscsi.Digest(bhs) != iscsi.GetDigest(d) {
				return append(out, refPDU{err: errors.New("header digest")})
			}
		}
		b := iscsi.BHS(bhs)
		if _, err := iscsi.Parse(b); err != nil {
			return append(out, refPDU{err: err})
		}
		dsl := int(b.DataSegmentLength())
		if b.TotalAHSLength() != 0 || dsl > maxSeg {
			return append(out, refPDU{err: errors.New("AHS or length")})
		}
		data := []byte{}
		if dsl > 0 {
			if data, err = get(dsl); err != nil {
				return append(out, refPDU{bhs: bhs, err: err})
			}
			pad := (4 - dsl%4) % 4
			tail, err := get(pad + map[bool]int{true: iscsi.DigestLen}[dd])
			if err != nil {
				return append(out, refPDU{bhs: bhs, err: err})
			}
			if dd && iscsi.DigestUpdate(iscsi.Digest(data), tail[:pad]) != iscsi.GetDigest(tail[pad:]) {
				return append(out, refPDU{bhs: bhs, err: errors.New("data digest")})
			}
		}
		out = append(out, refPDU{bhs: bhs, data: data})
	}
}

// FuzzReader: whatever the stream, and however it arrives, the Reader
// takes it apart exactly as a parser that reads field by field does: the
// same PDUs with the same data, and the same kind of failure at the same
// PDU. The first octet chooses the digests, the longest segment accepted
// and the largest piece a read returns; the second seeds the pieces' sizes.
func FuzzReader(f *testing.F) {
	for _, seed := range readerSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := readerCheck(in); err != nil {
			t.Fatal(err)
		}
	})
}

// readerCheck runs one input of FuzzReader and says what went wrong.
func readerCheck(in []byte) error {
	if len(in) < 2 {
		return nil
	}
	hd, dd := in[0]&1 != 0, in[0]&2 != 0
	maxSeg := 8192
	if in[0]&4 != 0 {
		maxSeg = 1 << 17
	}
	pieces := []int{1, 7, 64, 1500, 65536}[int(in[0]>>3)%5]
	stream := in[2:]
	want := reference(stream, hd, dd, maxSeg)
	var d Digests
	d.Header.Store(hd)
	d.Data.Store(dd)
	c := &chunkConn{data: stream, rng: rand.New(rand.NewPCG(uint64(in[1]), 1)), max: pieces}
	r := &Reader{Conn: c, Digests: &d, Max: maxSeg}
	for i, w := range want {
		bhs, err := r.Header()
		if w.bhs == nil {
			if errKind(err) != errKind(w.err) {
				return fmt.Errorf("PDU %d: Header %v, want an error like %v", i, err, w.err)
			}
			return nil
		}
		if err != nil || !bytes.Equal(bhs, w.bhs) {
			return fmt.Errorf("PDU %d: Header %x, %v; want %x", i, bhs, err, w.bhs)
		}
		data := make([]byte, bhs.DataSegmentLength())
		err = r.Data(data)
		if errKind(err) != errKind(w.err) {
			return fmt.Errorf("PDU %d: Data %v, want %v", i, err, w.err)
		}
		if w.err != nil {
			return nil
		}
		if !bytes.Equal(data, w.data) {
			return fmt.Errorf("PDU %d: data differs", i)
		}
	}
	return nil
}

// readerSeeds are streams of valid PDUs of many sizes, with and without
// digests, a truncated one and a corrupted one.
func readerSeeds() [][]byte {
	var seeds [][]byte
	for _, flags := range []byte{0, 3, 7, 7 | 8, 3 | 16, 4 | 32} {
		var d Digests
		d.Header.Store(flags&1 != 0)
		d.Data.Store(flags&2 != 0)
		w := &Writer{Digests: &d}
		sizes := []int{0, 5, 48, 4096, 1}
		if flags&4 != 0 {
			sizes = append(sizes, 16384, 3, 20000, 0)
		}
		var data [][]byte
		for i, n := range sizes {
			data = append(data, bytes.Repeat([]byte{byte(i + 1)}, n))
		}
		nops(w, data)
		s := []byte{flags, 9}
		for _, v := range w.iovs {
			s = append(s, v...)
		}
		seeds = append(seeds, s, s[:len(s)-3])
		bad := append([]byte(nil), s...)
		bad[len(bad)/2] ^= 0x40
		seeds = append(seeds, bad)
	}
	return seeds
}
