package lunfs

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/hostdev/uring"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ringEntry is an entry's buffers as the kernel fills them, without a
// kernel: a FUSE request is put in them by request.
func ringEntry(t *testing.T, fs *FS) *ringEnt {
	mem := make([]byte, hdrStride+(1<<20)+4096)
	s := &ringServer{fs: fs}
	q := &ringQueue{s: s}
	return &ringEnt{q: q, hdr: mem[:hdrSize], payload: mem[hdrStride:]}
}

// request puts a request in the entry as the kernel does: the in header in
// in_out, the op header in op_in, the rest in the payload.
func (e *ringEnt) request(h fuse.InHeader, op unsafe.Pointer, opLen int, payload []byte) {
	h.Unique = 42
	copy(e.hdr, unsafe.Slice((*byte)(unsafe.Pointer(&h)), inHeaderSize))
	clear(e.hdr[hdrOpIn : hdrOpIn+128])
	if opLen > 0 {
		copy(e.hdr[hdrOpIn:], unsafe.Slice((*byte)(op), opLen))
	}
	copy(e.payload, payload)
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])) = uint32(len(payload))
}

// reply is the answer handle left in the entry.
func (e *ringEnt) reply() (oh fuse.OutHeader, payload []byte) {
	oh = *(*fuse.OutHeader)(unsafe.Pointer(&e.hdr[0]))
	n := *(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz]))
	return oh, e.payload[:n]
}

// TestRingHandle answers requests laid out as the kernel lays them out in
// an entry (op header apart from the in header, a write's data and a
// lookup's name in the payload), and checks the replies' layout: the
// status and unique in the out header, the arguments' length in
// payload_sz. Reads and writes allocate nothing.
func TestRingHandle(t *testing.T) {
	st := testtarget.Memory(t, 1<<20)
	s := testtarget.Start(t, st).Dial(t, initiator.Config{Buffers: 8 << 20})
	slots, err := remote.NewSlots(s, 2, 1<<20+8192)
	if err != nil {
		t.Fatal(err)
	}
	defer slots.Close()
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	fs := New([]*remote.Disk{d}, slots.Len(), Options{DirectIO: true})
	e := ringEntry(t, fs)
	file := fuse.InHeader{NodeId: rootIno + 1}

	// LOOKUP: the name and its NUL in the payload.
	lh := fuse.InHeader{Opcode: opLookup, NodeId: rootIno}
	e.request(lh, nil, 0, []byte("lun0\x00"))
	e.handle()
	oh, out := e.reply()
	if oh.Status != 0 || oh.Unique != 42 || len(out) != int(unsafe.Sizeof(fuse.EntryOut{})) || (*fuse.EntryOut)(unsafe.Pointer(&out[0])).NodeId != rootIno+1 {
		t.Fatalf("lookup: %+v, %d octets", oh, len(out))
	}
	e.request(lh, nil, 0, []byte("lun1\x00"))
	e.handle()
	if oh, out = e.reply(); oh.Status != -int32(fuse.ENOENT) || len(out) != 0 || oh.Length != outHeaderSize {
		t.Fatalf("lookup of an absent name: %+v, %d octets", oh, len(out))
	}

	// WRITE: fuse_write_in in op_in, the data in the payload.
	data := bytes.Repeat([]byte("0123456789abcdef"), 256)
	wh := file
	wh.Opcode = opWrite
	win := fuse.WriteIn{Offset: 8192, Size: uint32(len(data))}
	write := func() {
		e.request(wh, unsafe.Add(unsafe.Pointer(&win), inHeaderSize), int(unsafe.Sizeof(win))-inHeaderSize, data)
		e.handle()
	}
	write()
	oh, out = e.reply()
	if oh.Status != 0 || len(out) != 8 || (*fuse.WriteOut)(unsafe.Pointer(&out[0])).Size != uint32(len(data)) {
		t.Fatalf("write: %+v % x", oh, out)
	}
	if !bytes.Equal(st.Mapping().Bytes()[8192:8192+len(data)], data) {
		t.Fatal("the write did not reach the LUN")
	}

	// READ: fuse_read_in in op_in, the data back in the payload.
	rh := file
	rh.Opcode = opRead
	rin := fuse.ReadIn{Offset: 8192 + 7, Size: 1000}
	read := func() {
		e.request(rh, unsafe.Add(unsafe.Pointer(&rin), inHeaderSize), int(unsafe.Sizeof(rin))-inHeaderSize, nil)
		e.handle()
	}
	read()
	if oh, out = e.reply(); oh.Status != 0 || !bytes.Equal(out, data[7:1007]) {
		t.Fatalf("read: %+v, %d octets, equal %v", oh, len(out), bytes.Equal(out, data[7:1007]))
	}

	// GETATTR, and an op the FS leaves to go-fuse's default.
	gh := file
	gh.Opcode = opGetAttr
	var gin [16]byte // fuse_getattr_in
	e.request(gh, unsafe.Pointer(&gin), len(gin), nil)
	e.handle()
	if oh, out = e.reply(); oh.Status != 0 || len(out) != int(unsafe.Sizeof(fuse.AttrOut{})) || (*fuse.AttrOut)(unsafe.Pointer(&out[0])).Size != 1<<20 {
		t.Fatalf("getattr: %+v, %d octets", oh, len(out))
	}
	mh := fuse.InHeader{Opcode: 8 /* MKNOD */, NodeId: rootIno}
	var mknodIn [16]byte // fuse_mknod_in
	e.request(mh, unsafe.Pointer(&mknodIn), len(mknodIn), []byte("x\x00"))
	e.handle()
	if oh, _ = e.reply(); oh.Status != -int32(fuse.ENOSYS) {
		t.Fatalf("mknod: %+v", oh)
	}

	if testing.Short() || raceEnabled {
		return
	}
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Errorf("a 1000-octet read over the ring allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, write); n != 0 {
		t.Errorf("a 4 KiB write over the ring allocates %v times", n)
	}
}

// TestRingReaperAllocs: the reaper's part of each request (reaping a CQE,
// taking the answered entries, queueing their commits and the eventfd's
// poll) allocates nothing.
func TestRingReaperAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	r, err := uring.New(8, uring.SetupSQE128)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer r.Close()
	q := &ringQueue{r: r, s: &ringServer{fd: -1}, ents: make([]ringEnt, 2),
		done: make([]uint16, 0, 2), spare: make([]uint16, 0, 2)}
	q.ents[1].wake = make(chan struct{}, 1)
	n := testing.AllocsPerRun(100, func() {
		sqe, _ := r.SQE()
		uring.PutNop(sqe, pollTag)
		sqe, _ = r.SQE()
		uring.PutNop(sqe, 1) // "a request for entry 1"
		if err := r.Enter(2); err != nil {
			t.Fatal(err)
		}
		for r.Ready() < 2 {
			r.Wait(1)
		}
		r.Reap(q.completion)
		<-q.ents[1].wake
		q.mu.Lock()
		q.done = append(q.done, 1)
		q.done, q.spare = q.spare[:0], q.done
		q.mu.Unlock()
		if !q.polled || len(q.spare) != 1 {
			t.Fatalf("polled %v, %d answered", q.polled, len(q.spare))
		}
		q.polled = false
		// The commit goes to descriptor -1, so it completes at once (EBADF):
		// reaped here, apart from the queue's bookkeeping.
		if err := q.commit(&q.ents[1]); err != nil {
			t.Fatal(err)
		}
		r.Enter(1)
		r.Reap(func(uint64, int32) {})
	})
	if n != 0 {
		t.Errorf("the reaper allocates %v times per request", n)
	}
}
