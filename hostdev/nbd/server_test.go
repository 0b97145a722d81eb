package nbd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

const (
	lunSize  = 8 << 20
	slotSize = 256<<10 + 2*4096
)

// serve starts a Server for LUN 0 of a memory store on one end of a
// socketpair and returns the other end, which the test drives as the
// kernel would, and the store's bytes.
func serve(t *testing.T) (net.Conn, []byte, *Server) {
	t.Helper()
	testtarget.CheckLeaks(t)
	st := testtarget.Memory(t, lunSize)
	tt := testtarget.Start(t, st)
	s := tt.Dial(t, initiator.Config{Buffers: 16 << 20, QueueDepth: 16})
	slots, err := remote.NewSlots(s, 8, slotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slots.Close)
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	f := newFileConn(t, theirs)
	srv := NewServer(NewLUN(s, d), 8, testtarget.Quiet())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ours) }()
	t.Cleanup(func() {
		f.Close()
		if err := <-done; err == nil {
			t.Error("Serve returned nil")
		}
		ours.Close()
	})
	return f, st.Mapping().Bytes(), srv
}

// client plays the kernel's side: it sends requests and matches replies
// by handle.
type client struct {
	t  *testing.T
	c  net.Conn
	mu sync.Mutex
	h  uint64
}

func (c *client) send(r Request, payload []byte) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.h++
	r.Handle = c.h
	var b [RequestLen]byte
	if _, err := c.c.Write(append(r.Encode(b[:]), payload...)); err != nil {
		c.t.Fatal(err)
	}
	return r.Handle
}

// recv reads a reply and, when it is for a read without error, n octets.
func (c *client) recv(n int) (Reply, []byte) {
	var b [SimpleReplyLen]byte
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.c, b[:]); err != nil {
		c.t.Fatal(err)
	}
	r, err := ParseReply(b[:])
	if err != nil {
		c.t.Fatal(err)
	}
	if r.Error != 0 || n == 0 {
		return r, nil
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c.c, data); err != nil {
		c.t.Fatal(err)
	}
	return r, data
}

// do sends one request and waits for its reply.
func (c *client) do(r Request, payload []byte, readLen int) (uint32, []byte) {
	h := c.send(r, payload)
	rep, data := c.recv(readLen)
	if rep.Handle != h {
		c.t.Fatalf("reply for handle %d, want %d", rep.Handle, h)
	}
	return rep.Error, data
}

func TestServeReadWrite(t *testing.T) {
	conn, store, _ := serve(t)
	c := &client{t: t, c: conn}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		off int64
		n   int
	}{{0, 512}, {4096, 4096}, {1 << 20, 128 << 10}, {3<<20 + 512, 1 << 20}, {lunSize - 4096, 4096}} {
		data := make([]byte, tc.n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if e, _ := c.do(Request{Type: CmdWrite, Offset: uint64(tc.off), Length: uint32(tc.n)}, data, 0); e != 0 {
			t.Fatalf("write of %d at %d: error %d", tc.n, tc.off, e)
		}
		if !bytes.Equal(store[tc.off:tc.off+int64(tc.n)], data) {
			t.Fatalf("write of %d at %d did not reach the store", tc.n, tc.off)
		}
		e, got := c.do(Request{Type: CmdRead, Offset: uint64(tc.off), Length: uint32(tc.n)}, nil, tc.n)
		if e != 0 || !bytes.Equal(got, data) {
			t.Fatalf("read of %d at %d: error %d, data equal %v", tc.n, tc.off, e, bytes.Equal(got, data))
		}
	}
	if e, _ := c.do(Request{Type: CmdWrite, Flags: CmdFlagFUA, Offset: 0, Length: 512}, make([]byte, 512), 0); e != 0 {
		t.Fatalf("FUA write: error %d", e)
	}
	if e, _ := c.do(Request{Type: CmdFlush}, nil, 0); e != 0 {
		t.Fatalf("flush: error %d", e)
	}
}

func TestServeTrimAndWriteZeroes(t *testing.T) {
	conn, store, srv := serve(t)
	if f := srv.Flags(); f&(FlagSendFlush|FlagSendTrim|FlagHasFlags) != FlagSendFlush|FlagSendTrim|FlagHasFlags || f&FlagReadOnly != 0 {
		t.Fatalf("flags %#x", f)
	}
	c := &client{t: t, c: conn}
	ones := bytes.Repeat([]byte{0xa5}, 1<<20)
	for _, tc := range []struct {
		req Request
	}{
		{Request{Type: CmdTrim, Offset: 64 << 10, Length: 512 << 10}},
		{Request{Type: CmdWriteZeroes, Offset: 8192, Length: 4096}},
		{Request{Type: CmdWriteZeroes, Flags: CmdFlagNoHole, Offset: 700 << 10, Length: 200 << 10}},
	} {
		copy(store, ones)
		r := tc.req
		if e, _ := c.do(r, nil, 0); e != 0 {
			t.Fatalf("%s: error %d", CmdName(r.Type), e)
		}
		a, b := int(r.Offset), int(r.Offset)+int(r.Length)
		if !bytes.Equal(store[a:b], make([]byte, b-a)) {
			t.Fatalf("%s [%d, %d) left data", CmdName(r.Type), a, b)
		}
		if !bytes.Equal(store[:a], ones[:a]) || !bytes.Equal(store[b:1<<20], ones[b:]) {
			t.Fatalf("%s [%d, %d) changed data outside it", CmdName(r.Type), a, b)
		}
	}
}

func TestServeErrors(t *testing.T) {
	conn, _, _ := serve(t)
	c := &client{t: t, c: conn}
	for _, tc := range []struct {
		req  Request
		want uint32
	}{
		{Request{Type: CmdRead, Offset: lunSize - 512, Length: 1024}, EINVAL},
		{Request{Type: CmdRead, Offset: 1 << 62, Length: 512}, EINVAL},
		{Request{Type: CmdWrite, Offset: lunSize, Length: 512}, ENOSPC},
		{Request{Type: CmdTrim, Offset: 100, Length: 512}, EINVAL}, // not whole blocks
		{Request{Type: 42}, EINVAL},
	} {
		var payload []byte
		if tc.req.HasPayload() {
			payload = make([]byte, tc.req.Length)
		}
		if e, _ := c.do(tc.req, payload, int(tc.req.Length)); e != tc.want {
			t.Errorf("%s of %d at %d: error %d, want %d", CmdName(tc.req.Type), tc.req.Length, tc.req.Offset, e, tc.want)
		}
	}
	// The connection still serves.
	if e, _ := c.do(Request{Type: CmdRead, Length: 512}, nil, 512); e != 0 {
		t.Fatalf("read after errors: %d", e)
	}
}

// TestServeConcurrent keeps many requests in flight and matches their
// replies by handle, as the kernel does with its tags.
func TestServeConcurrent(t *testing.T) {
	conn, store, _ := serve(t)
	c := &client{t: t, c: conn}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range store {
		store[i] = byte(rng.Uint32())
	}
	const n = 64
	want := map[uint64][]byte{}
	for i := range n {
		off := int64(i) * 64 << 10
		h := c.send(Request{Type: CmdRead, Offset: uint64(off), Length: 32 << 10}, nil)
		want[h] = store[off : off+32<<10]
	}
	for range n {
		rep, data := c.recv(32 << 10)
		w, ok := want[rep.Handle]
		if !ok || rep.Error != 0 || !bytes.Equal(data, w) {
			t.Fatalf("reply for handle %d: known %v, error %d", rep.Handle, ok, rep.Error)
		}
		delete(want, rep.Handle)
	}
}

func TestServeDisconnect(t *testing.T) {
	testtarget.CheckLeaks(t)
	st := testtarget.Memory(t, lunSize)
	tt := testtarget.Start(t, st)
	s := tt.Dial(t, initiator.Config{Buffers: 16 << 20, QueueDepth: 16})
	slots, err := remote.NewSlots(s, 4, slotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slots.Close)
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	f := newFileConn(t, theirs)
	defer f.Close()
	srv := NewServer(NewLUN(s, d), 4, testtarget.Quiet())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ours) }()
	c := &client{t: t, c: f}
	h := c.send(Request{Type: CmdRead, Length: 4096}, nil)
	c.send(Request{Type: CmdDisc}, nil)
	if rep, _ := c.recv(4096); rep.Handle != h || rep.Error != 0 {
		t.Fatalf("the read before DISC: %+v", rep)
	}
	if err := <-done; !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Serve after DISC: %v", err)
	}
}
