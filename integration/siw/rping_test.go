package siw

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// rping's protocol (rdma-core librdmacm/examples/rping.c), per ping:
//
//	client                                   server
//	Send {addr, rkey, len} of its source  ->
//	                                      <- RDMA Read of the source
//	                                      <- Send "go ahead" (16 octets)
//	Send {addr, rkey, len} of its sink    ->
//	                                      <- RDMA Write of strlen(data)+1 octets
//	                                      <- Send "go ahead"
//
// The advertisement is rping_rdma_info: be64 buf, be32 rkey, be32 size. The
// data is a C string filling the buffer (its last octet is NUL), and the
// client with -V checks that the sink holds what its source did. The
// client's receive handler refuses any message that is not exactly 16
// octets ("Received bogus data").

const infoLen = 16

// endpoint is one of our ends of an rping conversation: a QP with its CQs
// and two data buffers of size octets each (the client's source and sink,
// or the server's one buffer) and a small region for the messages.
type endpoint struct {
	t        *testing.T
	dev      *iwarp.Device
	pd       mem.PD
	scq, rcq *iwarp.CQ
	qp       *iwarp.QP
	a, b     *mem.MR // data buffers
	msgs     *mem.MR // [0:16] received, [32:48] sent
	size     int
}

func newEndpoint(t *testing.T, size int) *endpoint {
	t.Helper()
	e := &endpoint{t: t, dev: iwarp.NewDevice(0), size: size}
	t.Cleanup(func() { e.dev.Close() })
	e.pd = e.dev.AllocPD()
	var err error
	if e.scq, err = e.dev.NewCQ(64); err != nil {
		t.Fatal(err)
	}
	if e.rcq, err = e.dev.NewCQ(64); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = e.dev.NewQP(iwarp.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq}); err != nil {
		t.Fatal(err)
	}
	m, err := mem.Anonymous(2*size + 4096)
	if err != nil {
		t.Fatal(err)
	}
	reg := func(off, n int, acc mem.Access) *mem.MR {
		mr, err := e.dev.Register(e.pd, m, off, n, acc)
		if err != nil {
			t.Fatal(err)
		}
		return mr
	}
	all := mem.LocalWrite | mem.RemoteRead | mem.RemoteWrite
	e.a = reg(0, size, all)
	e.b = reg(size, size, all)
	e.msgs = reg(2*size, 64, mem.LocalWrite)
	return e
}

// wait returns the next completion of cq, or an error for a failed one
// (with the QP's reason) or when ctx ends.
func (e *endpoint) wait(ctx context.Context, cq *iwarp.CQ, what string) (iwarp.WC, error) {
	var wcs [1]iwarp.WC
	for {
		if cq.Poll(wcs[:]) == 1 {
			if wcs[0].Status != iwarp.StatusSuccess {
				return wcs[0], &wcError{what: what, wc: wcs[0], qpErr: e.qp.Err()}
			}
			return wcs[0], nil
		}
		if err := cq.Wait(ctx, false); err != nil {
			return iwarp.WC{}, fmt.Errorf("%s: %w (QP %v: %v)", what, err, e.qp.State(), e.qp.Err())
		}
	}
}

// wcError is a failed work completion.
type wcError struct {
	what  string
	wc    iwarp.WC
	qpErr error
}

func (e *wcError) Error() string {
	return fmt.Sprintf("%s: %v completion (QP: %v)", e.what, e.wc.Status, e.qpErr)
}

func (e *wcError) Unwrap() error { return e.qpErr }

func (e *endpoint) postRecv() error {
	return e.qp.PostRecv(&iwarp.RecvWR{ID: 9, SGL: []iwarp.SGE{iwarp.SGEOf(e.msgs, 0, infoLen)}})
}

// sendInfo Sends rping_rdma_info {addr, stag, size} and waits for its
// completion.
func (e *endpoint) sendInfo(ctx context.Context, addr uint64, stag mem.STag, size int) error {
	b := e.msgs.Bytes()[32 : 32+infoLen]
	binary.BigEndian.PutUint64(b[0:8], addr)
	binary.BigEndian.PutUint32(b[8:12], uint32(stag))
	binary.BigEndian.PutUint32(b[12:16], uint32(size))
	if err := e.qp.PostSend(&iwarp.SendWR{ID: 1, Op: iwarp.OpSend, SGL: []iwarp.SGE{iwarp.SGEOf(e.msgs, 32, infoLen)}}); err != nil {
		return err
	}
	_, err := e.wait(ctx, e.scq, "Send")
	return err
}

// recvInfo waits for the posted receive and parses rping_rdma_info.
func (e *endpoint) recvInfo(ctx context.Context, what string) (addr uint64, stag mem.STag, size int, err error) {
	wc, err := e.wait(ctx, e.rcq, what)
	if err != nil {
		return 0, 0, 0, err
	}
	if wc.ByteLen != infoLen {
		return 0, 0, 0, fmt.Errorf("%s: %d octets, want %d", what, wc.ByteLen, infoLen)
	}
	b := e.msgs.Bytes()[:infoLen]
	return binary.BigEndian.Uint64(b[0:8]), mem.STag(binary.BigEndian.Uint32(b[8:12])), int(binary.BigEndian.Uint32(b[12:16])), nil
}

// connect connects the endpoint to rping -s on port, retrying while rping
// is not listening yet.
func (e *endpoint) connect(ctx context.Context, port int, cfg iwarp.ConnConfig) error {
	addr := fmt.Sprintf("%s:%d", guestAddr, port)
	var err error
	for range 50 {
		if _, err = e.qp.Connect(ctx, "tcp", addr, cfg); err == nil {
			return nil
		}
		var rej *iwarp.RejectedError
		if errors.As(err, &rej) || ctx.Err() != nil || !isRefused(err) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func isRefused(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("connection refused"))
}

// advert is what an rping message advertises (rping_rdma_info): a
// buffer's address, STag and length.
type advert struct {
	addr uint64
	stag mem.STag
	size int
}

// faults alter an rping conversation to provoke an error at the peer; a
// nil hook changes nothing. The client's hooks change what it advertises
// as its source and its sink, the server's where its RDMA Read and its
// RDMA Write go.
type faults struct {
	source, sink func(e *endpoint, a advert) advert
	read, write  func(e *endpoint, a advert) advert
}

func apply(hook func(*endpoint, advert) advert, e *endpoint, a advert) advert {
	if hook == nil {
		return a
	}
	return hook(e, a)
}

// rpingClient runs count pings of rping's client side over a connected
// endpoint and checks each echo; f may alter the advertisements.
func (e *endpoint) rpingClient(ctx context.Context, count int, f faults) error {
	start, sink := e.a, e.b
	for i := range count {
		src := start.Bytes()
		// As rping fills it: a C string filling the buffer.
		n := copy(src, fmt.Sprintf("rdma-ping-%d: ", i))
		for j := n; j < len(src); j++ {
			src[j] = byte('A' + (i+j)%26)
		}
		src[len(src)-1] = 0
		clear(sink.Bytes())
		if err := e.postRecv(); err != nil {
			return err
		}
		sa := apply(f.source, e, advert{start.BaseTO(), start.STag(), e.size})
		if err := e.sendInfo(ctx, sa.addr, sa.stag, sa.size); err != nil { // RDMA_READ_ADV
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if _, _, _, err := e.recvInfo(ctx, "go ahead after the RDMA Read"); err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if err := e.postRecv(); err != nil {
			return err
		}
		da := apply(f.sink, e, advert{sink.BaseTO(), sink.STag(), e.size})
		if err := e.sendInfo(ctx, da.addr, da.stag, da.size); err != nil { // RDMA_WRITE_ADV
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if _, _, _, err := e.recvInfo(ctx, "go ahead after the RDMA Write"); err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if !bytes.Equal(sink.Bytes(), src) {
			return fmt.Errorf("ping %d: the sink does not hold what the source did", i)
		}
	}
	return nil
}

// disconnect closes gracefully and waits for the QP to be done.
func (e *endpoint) disconnect(ctx context.Context) error {
	e.qp.Disconnect()
	select {
	case <-e.qp.Done():
		return e.qp.Err()
	case <-ctx.Done():
		return fmt.Errorf("graceful disconnect did not finish: %w", ctx.Err())
	}
}

// reregister registers the octets of mr, one of the endpoint's data
// buffers, once more with other access rights, and returns the new region.
func (e *endpoint) reregister(mr *mem.MR, acc mem.Access) *mem.MR {
	e.t.Helper()
	r, err := e.dev.Register(e.pd, mr.Mapping(), int(mr.BaseTO()-e.a.BaseTO()), mr.Len(), acc)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestGuestRpingClientAgainstSiwServer runs rping's protocol as the client
// against `rping -s` on siw: for each ping the client advertises its source
// buffer, siw RDMA-Reads it and says go ahead, the client advertises its
// sink, siw RDMA-Writes the data back and says go ahead, and the client
// checks the sink holds what the source did.
func TestGuestRpingClientAgainstSiwServer(t *testing.T) {
	inGuest(t)
	const size, count, port = 4096, 5, 7174
	siwParams(t, siwDefaults)
	c := startCapture(t, captureMeta{Name: "client-basic", Port: port, Role: "client", Rev: 2, CRC: boolp(true), FullOperation: true})
	srv := startRpingServer(t, port, size, count)
	ctx := scenarioCtx(t, 30*time.Second)
	e := newEndpoint(t, size)
	if err := e.connect(ctx, port, iwarp.ConnConfig{}); err != nil {
		t.Fatalf("connect to rping -s: %v", err)
	}
	if err := e.rpingClient(ctx, count, faults{}); err != nil {
		t.Fatal(err)
	}
	if err := e.disconnect(ctx); err != nil {
		t.Errorf("disconnect: %v", err)
	}
	if err := srv.wait(10 * time.Second); err != nil {
		t.Errorf("rping -s: %v", err)
	}
	c.outcome("%d pings of %d octets validated; graceful disconnect", count, size)
}
