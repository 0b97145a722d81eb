package lunfs

// FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING, switched on by
// /sys/module/fuse/parameters/enable_uring). The ABI is the kernel's
// Documentation/filesystems/fuse-io-uring.rst and include/uapi/linux/fuse.h
// (FUSE 7.42); this host's uapi headers are older, so it is spelled out here.
//
// After INIT has answered FUSE_OVER_IO_URING, the kernel holds every
// request until each of its queues, one per possible CPU, has an entry
// registered (FUSE_IO_URING_CMD_REGISTER, a URING_CMD on the /dev/fuse
// descriptor with a 128-octet SQE), then sends each request to the queue
// of the CPU its caller runs on, by completing one of that queue's entries
// with the request in the entry's buffers: fuse_in_header and the op's own
// header in the 288-octet header buffer, the rest (a name, a write's data)
// in the payload buffer. The answer goes back into the same buffers
// (fuse_out_header, and the reply's arguments in the payload) and a
// COMMIT_AND_FETCH both delivers it and makes the entry available again.
// FORGET, INTERRUPT and notifications stay on /dev/fuse, which go-fuse
// keeps serving.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/uring"
	"github.com/hanwen/go-fuse/v2/fuse"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

const (
	// The URING_CMD sub-commands (enum fuse_uring_cmd).
	cmdRegister       = 1
	cmdCommitAndFetch = 2

	// struct fuse_uring_req_header: in_out[128], op_in[128], then
	// struct fuse_uring_ent_in_out {flags, commit_id u64; payload_sz,
	// padding u32; reserved u64}.
	hdrOpIn      = 128
	hdrCommitID  = 256 + 8
	hdrPayloadSz = 256 + 16
	hdrSize      = 256 + 32
	// hdrStride keeps every entry's header 64-octet aligned.
	hdrStride = 512

	// struct fuse_uring_cmd_req {flags, commit_id u64; qid u16; padding[6]}.
	cmdReqSize = 24

	inHeaderSize  = int(unsafe.Sizeof(fuse.InHeader{}))
	outHeaderSize = 16

	// maxRingDepth bounds the entries of one queue, ringMemory the
	// payload buffers of all of them.
	maxRingDepth = 32
	ringMemory   = 256 << 20
)

// uringEnabled is the kernel's switch.
const uringEnabled = "/sys/module/fuse/parameters/enable_uring"

// ringUnavailable says why FUSE over io_uring cannot be used here, or nil.
func ringUnavailable() error {
	b, err := os.ReadFile(uringEnabled)
	if err != nil {
		return fmt.Errorf("this kernel has no FUSE over io_uring (%s: %v)", uringEnabled, errors.Unwrap(err))
	}
	if strings.TrimSpace(string(b)) != "Y" {
		return fmt.Errorf("FUSE over io_uring is switched off (%s is %s)", uringEnabled, strings.TrimSpace(string(b)))
	}
	r, err := uring.New(1, uring.SetupSQE128)
	if err != nil {
		return fmt.Errorf("no io_uring for this process: %v", err)
	}
	r.Close()
	return nil
}

// possibleCPUs is the kernel's num_possible_cpus(): the number of queues.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("possible CPUs %q: %v", b, err)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return 0, fmt.Errorf("possible CPUs %q", b)
			}
		}
		n += z - a + 1
	}
	return n, nil
}

// ringServer serves the requests that arrive on the FUSE connection's
// io_uring queues, with the same FS methods go-fuse calls.
type ringServer struct {
	fs     *FS
	fd     int    // our own descriptor of the connection (a dup of go-fuse's)
	mem    []byte // the queues' eventfd counts, every entry's header and payload buffer: mmap'd
	queues []*ringQueue

	requests atomic.Uint64 // requests answered over the ring
	polls    atomic.Uint64 // POLLs among them (the tests' view of pollHack)
	reapers  sync.WaitGroup
	workers  sync.WaitGroup
}

// ringQueue is one queue: its own ring, owned by one locked OS thread (its
// reaper), and one worker goroutine per entry.
//
// Only the reaper's thread submits to the ring. The kernel hands a
// request to an entry through task work run by the thread that submitted
// the entry's command; were that any thread of the Go runtime, it could be
// one blocked in a request to this very filesystem (a test, a loop device
// attach), which never runs the task work, and both would wait forever.
// So a worker hands its answered entry back through a list and an
// eventfd the reaper reads in its ring (a READ that completes when the
// eventfd is written, so waking costs the reaper no system call of its
// own).
type ringQueue struct {
	s    *ringServer
	qid  uint16
	ents []ringEnt
	r    *uring.Ring
	evfd int

	mu   sync.Mutex
	done []uint16 // answered entries, waiting for their COMMIT_AND_FETCH
	// spare is the reaper's list, swapped with done: no allocation.
	spare    []uint16
	stopping atomic.Bool

	// Reaper-only.
	regErr error // the first failed REGISTER
	live   int   // entries not yet ended
	polled bool  // the eventfd's read completed
	// evbuf is where the ring reads the eventfd's count: 8 octets of the
	// mmap'd buffers, which the kernel may write while this goroutine runs.
	evbuf []byte
}

// ringEnt is one entry: its buffers, and the worker that answers what
// arrives in them.
type ringEnt struct {
	q       *ringQueue
	idx     uint16
	hdr     []byte
	payload []byte
	iov     [2]unix.Iovec
	wake    chan struct{} // a request is in the buffers
	unique  uint64        // the request answered, for its commit
	ended   bool          // reaper-only
	// in is the request's fuse_in_header followed by its op header, the
	// layout of go-fuse's *In structs.
	in [(inHeaderSize + hdrOpIn + 7) / 8]uint64
}

// pollTag marks the completions of the eventfd's read.
const pollTag = ^uint64(0)

// newRingServer registers depth entries with payload buffers of payload
// octets on each of nq queues of the connection fd (which it dups), and
// starts serving them. A REGISTER the kernel refuses is an error with the
// server running (the kernel then keeps requests on /dev/fuse); any other
// error returns no server.
func newRingServer(fs *FS, fd, nq, depth, payload int) (*ringServer, error) {
	fd2, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("FUSE over io_uring: dup: %v", err)
	}
	s := &ringServer{fs: fs, fd: fd2}
	per := hdrStride + payload
	// The queues' eventfd counts come first, 64 octets apart, then the
	// entries, page-aligned.
	pg := os.Getpagesize()
	evs := (nq*64 + pg - 1) / pg * pg
	s.mem, err = unix.Mmap(-1, 0, evs+nq*depth*per, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Close(fd2)
		return nil, fmt.Errorf("FUSE over io_uring: %d octets of buffers: %v", evs+nq*depth*per, err)
	}
	for qid := range nq {
		q := &ringQueue{s: s, qid: uint16(qid), ents: make([]ringEnt, depth), evfd: -1,
			done: make([]uint16, 0, depth), spare: make([]uint16, 0, depth), evbuf: s.mem[qid*64 : qid*64+8]}
		s.queues = append(s.queues, q)
		if q.r, err = uring.New(uint32(depth+2), uring.SetupSQE128); err == nil {
			// Blocking: the ring's READ waits for a write (a non-blocking
			// one could end at once with EAGAIN).
			q.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC)
		}
		if err != nil {
			s.close()
			return nil, fmt.Errorf("FUSE over io_uring: queue %d: %v", qid, err)
		}
		for i := range q.ents {
			e := &q.ents[i]
			base := evs + (qid*depth+i)*per
			e.q, e.idx = q, uint16(i)
			e.hdr = s.mem[base : base+hdrSize : base+hdrSize]
			e.payload = s.mem[base+hdrStride : base+per : base+per]
			e.iov[0].Base, e.iov[0].Len = &e.hdr[0], hdrSize
			e.iov[1].Base, e.iov[1].Len = &e.payload[0], uint64(payload)
			e.wake = make(chan struct{}, 1)
		}
	}
	started := make(chan error, len(s.queues))
	for _, q := range s.queues {
		q.live = len(q.ents)
		for i := range q.ents {
			s.workers.Add(1)
			go q.ents[i].serve()
		}
		s.reapers.Add(1)
		go q.run(started)
	}
	var first error
	for range s.queues {
		if err := <-started; err != nil && first == nil {
			first = err
		}
	}
	return s, first
}

// run registers the queue's entries from the queue's own thread, then
// hands each request to its entry's worker and commits the answers, until
// every entry has ended (the connection is gone) or stop asks.
func (q *ringQueue) run(started chan<- error) {
	defer q.s.reapers.Done()
	defer q.endAll()
	runtime.LockOSThread() // never unlocked: the thread ends with the queue
	for i := range q.ents {
		e := &q.ents[i]
		var cmd [cmdReqSize]byte
		*(*uint16)(unsafe.Pointer(&cmd[16])) = q.qid
		sqe, err := q.r.SQE()
		if err != nil {
			started <- err
			return
		}
		uring.PutCmdVec(sqe, q.s.fd, cmdRegister, uint64(e.idx), unsafe.Pointer(&e.iov[0]), 2, cmd[:])
	}
	if err := q.armPoll(); err != nil {
		started <- err
		return
	}
	if err := q.r.Submit(); err != nil {
		started <- fmt.Errorf("FUSE over io_uring: queue %d: REGISTER: %v", q.qid, err)
		return
	}
	// A REGISTER that fails completes within the submit; one that
	// succeeds completes only with a request.
	q.r.Reap(q.completion)
	started <- q.regErr
	for q.live > 0 {
		if err := q.r.Enter(1); err != nil {
			log.Errorf("FUSE over io_uring: queue %d: %v", q.qid, err)
			return
		}
		q.r.Reap(q.completion)
		if !q.polled {
			continue
		}
		q.polled = false
		if q.stopping.Load() {
			return
		}
		q.mu.Lock()
		q.done, q.spare = q.spare[:0], q.done
		q.mu.Unlock()
		for _, i := range q.spare {
			if err := q.commit(&q.ents[i]); err != nil {
				log.Errorf("FUSE over io_uring: queue %d: COMMIT_AND_FETCH: %v", q.qid, err)
				return
			}
		}
		if err := q.armPoll(); err != nil {
			log.Errorf("FUSE over io_uring: queue %d: %v", q.qid, err)
			return
		}
	}
}

// armPoll queues the READ of the eventfd that wakes the reaper.
func (q *ringQueue) armPoll() error {
	sqe, err := q.r.SQE()
	if err != nil {
		return err
	}
	uring.PutRead(sqe, q.evfd, unsafe.Pointer(&q.evbuf[0]), 8, ^uint64(0), pollTag)
	return nil
}

// commit queues the COMMIT_AND_FETCH of an answered entry: the kernel
// takes the answer and may put the next request in the entry at once.
func (q *ringQueue) commit(e *ringEnt) error {
	var cmd [cmdReqSize]byte
	*(*uint64)(unsafe.Pointer(&cmd[8])) = e.unique
	*(*uint16)(unsafe.Pointer(&cmd[16])) = q.qid
	sqe, err := q.r.SQE()
	if err != nil {
		return err
	}
	uring.PutCmd(sqe, q.s.fd, cmdCommitAndFetch, uint64(e.idx), cmd[:])
	return nil
}

// completion is one CQE: the eventfd's read, a request for entry ud (res
// 0), or the end of the entry's command (res < 0: the connection is gone,
// or REGISTER failed).
func (q *ringQueue) completion(ud uint64, res int32) {
	if ud == pollTag {
		q.polled = true
		return
	}
	if ud >= uint64(len(q.ents)) {
		return
	}
	e := &q.ents[ud]
	if res == 0 {
		e.wake <- struct{}{}
		return
	}
	err := syscall.Errno(-res)
	if err != syscall.ENOTCONN && err != syscall.ECONNABORTED && q.regErr == nil {
		q.regErr = fmt.Errorf("FUSE over io_uring: queue %d, entry %d: %v", q.qid, ud, err)
	}
	q.end(e)
}

// end retires an entry: its worker returns once it is idle.
func (q *ringQueue) end(e *ringEnt) {
	if !e.ended {
		e.ended = true
		q.live--
		close(e.wake)
	}
}

func (q *ringQueue) endAll() {
	for i := range q.ents {
		q.end(&q.ents[i])
	}
}

// serve answers each request that arrives in the entry and hands the
// entry back to the reaper.
func (e *ringEnt) serve() {
	defer e.q.s.workers.Done()
	for range e.wake {
		e.handle()
		q := e.q
		q.mu.Lock()
		wake := len(q.done) == 0
		q.done = append(q.done, e.idx)
		q.mu.Unlock()
		if wake {
			unix.Write(q.evfd, one[:])
		}
	}
}

// one is what a worker adds to the eventfd.
var one = [8]byte{1}

// handle answers the request in the entry's buffers: the reply header in
// the header buffer, its arguments in the payload buffer.
func (e *ringEnt) handle() {
	inb := unsafe.Slice((*byte)(unsafe.Pointer(&e.in[0])), len(e.in)*8)
	copy(inb, e.hdr[:inHeaderSize])
	copy(inb[inHeaderSize:], e.hdr[hdrOpIn:hdrOpIn+128])
	h := (*fuse.InHeader)(unsafe.Pointer(&e.in[0]))
	psz := int(*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])))
	if psz > len(e.payload) {
		psz = len(e.payload)
	}
	e.q.s.requests.Add(1)
	if h.Opcode == opPoll {
		e.q.s.polls.Add(1)
	}
	status, n := e.q.s.fs.dispatch(h, e.payload, psz)
	if !status.Ok() {
		n = 0
	}
	e.unique = h.Unique
	oh := (*fuse.OutHeader)(unsafe.Pointer(&e.hdr[0]))
	oh.Length, oh.Status, oh.Unique = uint32(outHeaderSize+n), -int32(status), h.Unique
	*(*uint64)(unsafe.Pointer(&e.hdr[hdrCommitID])) = h.Unique
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])) = uint32(n)
}

// dispatch calls the FS method of the request h, whose op header follows
// it in memory and whose further arguments are the first psz octets of
// payload; the reply's arguments go into payload, n octets of them.
func (fs *FS) dispatch(h *fuse.InHeader, payload []byte, psz int) (st fuse.Status, n int) {
	p := unsafe.Pointer(h)
	out := unsafe.Pointer(&payload[0])
	switch h.Opcode {
	case opLookup:
		// The name is the payload, or where a kernel before 6.14 made
		// it the first argument, the op header.
		name := payload[:psz]
		if psz == 0 {
			name = unsafe.Slice((*byte)(unsafe.Add(p, inHeaderSize)), hdrOpIn)
		}
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		// The reply goes where the name is: Lookup gets a copy.
		var nb [256]byte
		nm := nb[:copy(nb[:], name)]
		eo := (*fuse.EntryOut)(out)
		*eo = fuse.EntryOut{}
		return fs.Lookup(nil, h, string(nm), eo), int(unsafe.Sizeof(*eo))
	case opGetAttr:
		ao := (*fuse.AttrOut)(out)
		*ao = fuse.AttrOut{}
		return fs.GetAttr(nil, (*fuse.GetAttrIn)(p), ao), int(unsafe.Sizeof(*ao))
	case opSetAttr:
		ao := (*fuse.AttrOut)(out)
		*ao = fuse.AttrOut{}
		return fs.SetAttr(nil, (*fuse.SetAttrIn)(p), ao), int(unsafe.Sizeof(*ao))
	case opAccess:
		return fs.Access(nil, (*fuse.AccessIn)(p)), 0
	case opOpen, opOpenDir:
		oo := (*fuse.OpenOut)(out)
		*oo = fuse.OpenOut{}
		if h.Opcode == opOpen {
			st = fs.Open(nil, (*fuse.OpenIn)(p), oo)
		} else {
			st = fs.OpenDir(nil, (*fuse.OpenIn)(p), oo)
		}
		return st, int(unsafe.Sizeof(*oo))
	case opRead:
		in := (*fuse.ReadIn)(p)
		if int(in.Size) > len(payload) {
			return fuse.EINVAL, 0
		}
		rr, st := fs.Read(nil, in, nil)
		if !st.Ok() {
			return st, 0
		}
		// The one copy of the ring path: the entry's payload buffer is
		// fixed at REGISTER, the data is in the slot the target placed
		// it in.
		b, st := rr.Bytes(payload[:in.Size])
		if st.Ok() {
			n = copy(payload, b)
		}
		rr.Done()
		return st, n
	case opWrite:
		in := (*fuse.WriteIn)(p)
		if int(in.Size) > psz {
			return fuse.EINVAL, 0
		}
		w, st := fs.Write(nil, in, payload[:in.Size])
		if !st.Ok() {
			return st, 0
		}
		wo := (*fuse.WriteOut)(out)
		*wo = fuse.WriteOut{Size: w}
		return fuse.OK, int(unsafe.Sizeof(*wo))
	case opFsync:
		return fs.Fsync(nil, (*fuse.FsyncIn)(p)), 0
	case opFsyncDir:
		return fs.FsyncDir(nil, (*fuse.FsyncIn)(p)), 0
	case opFlush:
		return fs.Flush(nil, (*fuse.FlushIn)(p)), 0
	case opRelease:
		fs.Release(nil, (*fuse.ReleaseIn)(p))
		return fuse.OK, 0
	case opReleaseDir:
		fs.ReleaseDir((*fuse.ReleaseIn)(p))
		return fuse.OK, 0
	case opFallocate:
		return fs.Fallocate(nil, (*fuse.FallocateIn)(p)), 0
	case opReadDir, opReadDirPlus:
		in := (*fuse.ReadIn)(p)
		l := fuse.NewDirEntryList(payload[:min(int(in.Size), len(payload))], in.Offset)
		if h.Opcode == opReadDir {
			st = fs.ReadDir(nil, in, l)
		} else {
			st = fs.ReadDirPlus(nil, in, l)
		}
		return st, len(l.Bytes())
	case opStatFs:
		so := (*fuse.StatfsOut)(out)
		*so = fuse.StatfsOut{}
		return fs.StatFs(nil, h, so), int(unsafe.Sizeof(*so))
	}
	// What go-fuse answers for the RawFileSystem methods the FS leaves
	// to its default (create, links, xattrs with DisableXAttrs, ...).
	return fuse.ENOSYS, 0
}

// FUSE opcodes (include/uapi/linux/fuse.h, enum fuse_opcode).
const (
	opLookup      = 1
	opGetAttr     = 3
	opSetAttr     = 4
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatFs      = 17
	opRelease     = 18
	opFsync       = 20
	opFlush       = 25
	opOpenDir     = 27
	opReadDir     = 28
	opReleaseDir  = 29
	opFsyncDir    = 30
	opAccess      = 34
	opPoll        = 40
	opFallocate   = 43
	opReadDirPlus = 44
)

// stop waits for every queue to end, which it does once the connection is
// gone; after grace it makes the queues stop waiting. Then it releases
// the rings, the buffers and the descriptors.
func (s *ringServer) stop(grace time.Duration) {
	done := make(chan struct{})
	go func() { s.reapers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		log.Warnf("FUSE over io_uring: queues still busy %v after the connection ended: stopping them", grace)
		for _, q := range s.queues {
			q.stopping.Store(true)
			unix.Write(q.evfd, one[:])
		}
		<-done
	}
	s.close()
}

// close releases what newRingServer made, once the workers are done; the
// reapers must have ended.
func (s *ringServer) close() {
	s.workers.Wait()
	for _, q := range s.queues {
		if q.r != nil {
			q.r.Close()
		}
		if q.evfd >= 0 {
			unix.Close(q.evfd)
		}
	}
	s.queues = nil
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
