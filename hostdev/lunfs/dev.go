package lunfs

// The classic transport: requests read from /dev/fuse and answered with
// writev on it, by this package rather than by go-fuse's reader.
//
// Each worker reads requests into a registered buffer slot of its own
// (remote.Slots.TryTake), so neither direction copies: a WRITE's data arrive
// from the kernel in registered memory, where the target reads them from
// (remote.Disk.WriteFrom), and a READ's data are placed by the target in
// the same slot and written to the kernel from there. The workers leave
// the pool devSpare slots for what needs one of its own (a write of part
// of a block, SYNCHRONIZE CACHE).
//
// The descriptor is non-blocking and waits in the Go runtime's network
// poller, like the session's socket, and both read and writev are raw
// system calls. go-fuse's blocking read(2) held an OS thread and its
// processor in the kernel, so the process needed a second processor to
// receive the target's answers (cmd/ddpinitiator's serverProcs), with
// every hand-off between goroutines a wake-up of another thread, and the
// runtime's monitor woken by each system call to watch it. Pinned to one
// CPU, the mount then spent 120-135 µs of CPU per 4 KiB I/O at queue
// depth 1, six context switches each; served from the poller with one
// processor (and a receiver that does not spin, see cmd/ddpinitiator)
// it spends about 75, two switches each, and does 1.3-1.7x the I/Os.
//
// go-fuse still mounts and answers INIT (NewServer reads it
// synchronously); its Serve runs only after the connection has ended, to
// close its descriptor. Requests other than READ and WRITE are answered
// by the FS's methods through the dispatch the io_uring transport uses.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/hanwen/go-fuse/v2/fuse"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// FUSE opcodes answered by no reply, or not through dispatch.
const (
	opForget      = 2
	opInterrupt   = 36
	opDestroy     = 38
	opNotifyReply = 41
	opBatchForget = 42
)

// writeInSize is a WRITE's op header (struct fuse_write_in): its data
// follows it.
const writeInSize = int(unsafe.Sizeof(fuse.WriteIn{})) - inHeaderSize

// devSpare is how many slots the workers leave in the pool.
const devSpare = 1

// devServer serves a FUSE connection's /dev/fuse.
type devServer struct {
	fs  *FS
	f   *os.File // a non-blocking dup of go-fuse's descriptor, in the poller
	rc  syscall.RawConn
	fd  int    // f's descriptor, for writev (a write to /dev/fuse never blocks)
	mem []byte // request buffers when there are no slots to read into: mmap'd
	ws  []*devWorker
	// turn: which worker reads next (the most recently idle one).
	turn *readTurn
	wg   sync.WaitGroup
}

// devWorker reads one request at a time and answers it.
type devWorker struct {
	s   *devServer
	sl  *remote.Slot  // the slot buf is, or nil
	buf []byte        // the request as read: fuse_in_header, op header, payload
	my  chan struct{} // the turn to read, when handed to this worker
	// requests counts what this worker read (its own; tests read it
	// once the workers have ended).
	requests uint64
	// in is the request's headers, copied out of buf so that the reply's
	// arguments may be written over them (dispatch's layout).
	in  [(inHeaderSize + hdrOpIn + 7) / 8]uint64
	out [outHeaderSize]byte
	wo  fuse.WriteOut
	iov [2]unix.Iovec
}

// newDevServer serves the connection fd (which it dups): with ownSlots a
// worker per slot of the disks' pool but devSpare; without, or when the
// disks have none to spare, two workers reading into buffers of their own.
func newDevServer(fs *FS, fd, maxWrite int, ownSlots bool) (*devServer, error) {
	fd2, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("/dev/fuse: dup: %v", err)
	}
	// O_NONBLOCK is the open file's, so go-fuse's descriptor shares it;
	// nothing reads that one until the connection has ended.
	if err := unix.SetNonblock(fd2, true); err != nil {
		unix.Close(fd2)
		return nil, fmt.Errorf("/dev/fuse: O_NONBLOCK: %v", err)
	}
	s := &devServer{fs: fs, f: os.NewFile(uintptr(fd2), "/dev/fuse"), fd: fd2}
	if s.rc, err = s.f.SyscallConn(); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("/dev/fuse: %v", err)
	}
	// The kernel wants room for the largest request: a WRITE's headers
	// and maxWrite octets, and at least FUSE_MIN_READ_BUFFER (8192).
	need := max(inHeaderSize+writeInSize+maxWrite, 8192)
	var ws []*devWorker
	if ownSlots && len(fs.files) > 0 {
		slots := fs.files[0].disk.Slots()
		if slots.Size() >= need {
			for range slots.Len() - devSpare {
				sl, ok := slots.TryTake() // all are free before the mount is used
				if !ok {
					break
				}
				ws = append(ws, &devWorker{s: s, sl: sl, buf: sl.Buffer()})
			}
		}
	}
	if len(ws) == 0 {
		pg := os.Getpagesize()
		size := (need + pg - 1) / pg * pg
		if s.mem, err = unix.Mmap(-1, 0, 2*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
			s.f.Close()
			return nil, fmt.Errorf("/dev/fuse: %d octets of request buffers: %v", 2*size, err)
		}
		for i := range 2 {
			ws = append(ws, &devWorker{s: s, buf: s.mem[i*size : (i+1)*size : (i+1)*size]})
		}
	}
	s.ws, s.turn = ws, newReadTurn(len(ws))
	for _, w := range ws {
		w.my = make(chan struct{}, 1)
		s.wg.Add(1)
		go w.serve()
	}
	return s, nil
}

// wait waits until every worker has ended (the connection is gone), then
// releases the buffers and the descriptor.
func (s *devServer) wait() {
	s.wg.Wait()
	s.f.Close()
	if s.mem != nil {
		unix.Munmap(s.mem)
	}
}

// serve reads and answers requests until the connection ends.
func (w *devWorker) serve() {
	defer w.s.wg.Done()
	if w.sl != nil {
		defer w.sl.Release()
	}
	for {
		w.s.turn.take(w.my)
		n, ok := w.s.read(w.buf)
		w.s.turn.pass() // the end too: each worker then reads and sees it
		if !ok {
			return
		}
		w.requests++
		if n < inHeaderSize {
			log.Errorf("/dev/fuse: a request of %d octets", n)
			continue
		}
		w.handle(n)
	}
}

// read reads the next request into buf, waiting in the poller (one
// worker at a time: the one whose turn it is); it reports false when the
// connection has ended.
func (s *devServer) read(buf []byte) (int, bool) {
	for {
		var n int
		var e unix.Errno
		err := s.rc.Read(func(fd uintptr) bool {
			r, _, en := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			n, e = int(r), en
			return e != unix.EAGAIN
		})
		switch {
		case err != nil: // closed under it
			return 0, false
		case e == 0:
			return n, true
		case e == unix.EINTR, e == unix.ENOENT: // ENOENT: the request was interrupted before it was read
			continue
		case e == unix.ENODEV: // unmounted
			return 0, false
		default:
			log.Errorf("/dev/fuse: read: %v", e)
			return 0, false
		}
	}
}

// handle answers the request of n octets in buf.
func (w *devWorker) handle(n int) {
	inb := unsafe.Slice((*byte)(unsafe.Pointer(&w.in[0])), len(w.in)*8)
	clear(inb)
	copy(inb, w.buf[:min(n, len(inb))])
	h := (*fuse.InHeader)(unsafe.Pointer(&w.in[0]))
	switch h.Opcode {
	case opForget, opBatchForget, opInterrupt, opNotifyReply:
		return // no reply: nothing is kept per inode, nor interrupted
	case opDestroy:
		w.reply(h.Unique, fuse.OK, nil)
		return
	case opRead:
		w.read((*fuse.ReadIn)(unsafe.Pointer(h)))
		return
	case opWrite:
		w.write((*fuse.WriteIn)(unsafe.Pointer(h)), n)
		return
	}
	// The payload (a LOOKUP's name, a WRITE's data) follows the op
	// header; the reply's arguments go over it.
	off := inHeaderSize
	st, k := w.s.fs.dispatch(h, w.buf[off:], n-off)
	if !st.Ok() {
		k = 0
	}
	w.reply(h.Unique, st, w.buf[off:off+k])
}

// read answers a READ from the slot the target placed the data in: the
// worker's own, or one of the pool's.
func (w *devWorker) read(in *fuse.ReadIn) {
	if w.sl == nil {
		rr, st := w.s.fs.Read(nil, in, nil)
		if !st.Ok() {
			w.reply(in.Unique, st, nil)
			return
		}
		b, st := rr.Bytes(nil)
		w.reply(in.Unique, st, b)
		rr.Done()
		return
	}
	f, ok := w.s.fs.lookupFile(in.NodeId)
	if !ok {
		w.reply(in.Unique, fuse.ENOENT, nil)
		return
	}
	b, err := f.disk.ReadInto(context.Background(), w.sl, int64(in.Offset), int(in.Size))
	switch {
	case err == nil:
		w.reply(in.Unique, fuse.OK, b)
	case isEOF(err):
		w.reply(in.Unique, fuse.OK, nil)
	default:
		w.reply(in.Unique, fuse.Status(remote.Errno(err)), nil)
	}
}

// write answers a WRITE of n octets in all (headers and data), from the
// worker's slot where the data arrived.
func (w *devWorker) write(in *fuse.WriteIn, n int) {
	const off = inHeaderSize + writeInSize
	if off > n || int(in.Size) > n-off {
		w.reply(in.Unique, fuse.EINVAL, nil)
		return
	}
	data := w.buf[off : off+int(in.Size)]
	f, ok := w.s.fs.lookupFile(in.NodeId)
	if !ok {
		w.reply(in.Unique, fuse.ENOENT, nil)
		return
	}
	var k int
	var err error
	if w.sl != nil {
		k, err = f.disk.WriteFrom(context.Background(), w.sl, int64(in.Offset), data)
	} else {
		k, err = f.disk.Write(context.Background(), int64(in.Offset), data)
	}
	if err != nil {
		w.reply(in.Unique, fuse.Status(remote.Errno(err)), nil)
		return
	}
	w.wo = fuse.WriteOut{Size: uint32(k)}
	w.reply(in.Unique, fuse.OK, unsafe.Slice((*byte)(unsafe.Pointer(&w.wo)), unsafe.Sizeof(w.wo)))
}

// reply writes the answer to request unique: the header, then data.
func (w *devWorker) reply(unique uint64, st fuse.Status, data []byte) {
	if !st.Ok() {
		data = nil
	}
	oh := (*fuse.OutHeader)(unsafe.Pointer(&w.out[0]))
	oh.Length, oh.Status, oh.Unique = uint32(outHeaderSize+len(data)), -int32(st), unique
	w.iov[0].Base, w.iov[0].Len = &w.out[0], outHeaderSize
	iov := w.iov[:1]
	if len(data) > 0 {
		w.iov[1].Base, w.iov[1].Len = &data[0], uint64(len(data))
		iov = w.iov[:2]
	}
	for {
		_, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(w.s.fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if e == unix.EINTR {
			continue
		}
		// ENOENT: the request was interrupted meanwhile; ENODEV: the
		// connection is gone. Neither is this answer's fault.
		if e != 0 && e != unix.ENOENT && e != unix.ENODEV {
			log.Errorf("/dev/fuse: reply to request %d: %v", unique, e)
		}
		return
	}
}
