// Package lunfs exposes remote LUNs as files of a FUSE filesystem, one
// regular file per LUN sized to it, so that fio, losetup, mkfs and mount
// can use them. Reads and writes go to the LUN as SCSI READ and WRITE, fsync
// as SYNCHRONIZE CACHE. A read reply is written to the kernel from the
// registered buffer the target placed the data in; nothing copies it.
//
// The open flags follow the measurements in the project's notes on FUSE:
// FOPEN_DIRECT_IO (no page cache between the program and the LUN, so a
// write has reached the target when write returns), FOPEN_PARALLEL_DIRECT_WRITES
// (writers to one file do not serialize on its inode lock) and async direct
// I/O (libaio keeps its queue depth).
//
// Requests reach the filesystem one of two ways, with the same methods
// answering: through /dev/fuse, read and answered by go-fuse, or over
// FUSE's io_uring queues (ring.go), where the kernel offers them
// (Options.IOURing). go-fuse mounts, answers INIT and serves /dev/fuse
// either way, which with the ring still carries FORGET and INTERRUPT.
// Over the ring a read's data is copied once, from the slot the target
// placed it in into the entry's payload buffer, which the kernel fixes
// when the entry is registered.
package lunfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/hanwen/go-fuse/v2/fuse"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Options are the mount's settings.
type Options struct {
	// DirectIO bypasses the kernel page cache (FOPEN_DIRECT_IO); off, the
	// kernel caches reads and writes through.
	DirectIO bool
	// MaxWrite is the largest read or write the kernel sends at once.
	MaxWrite int
	// AllowOther lets users other than the mounting one use the files.
	AllowOther bool
	// Name shows as the mount's source in /proc/mounts.
	Name string
	// Debug logs every FUSE request.
	Debug bool
	// IOURing is how requests reach the filesystem: IOURingOff (or empty)
	// only through /dev/fuse; IOURingAuto over FUSE's io_uring queues where
	// the kernel offers them, else through /dev/fuse; IOURingOn only over
	// io_uring (the mount fails where it cannot).
	IOURing string
}

// The IOURing modes.
const (
	IOURingAuto = "auto"
	IOURingOn   = "on"
	IOURingOff  = "off"
)

// CheckIOURing refuses an IOURing mode that is none of the three.
func CheckIOURing(mode string) error {
	switch mode {
	case "", IOURingAuto, IOURingOn, IOURingOff:
		return nil
	}
	return fmt.Errorf("io_uring mode %q: want off, auto or on", mode)
}

// attrValid is how long the kernel may cache names and attributes: the
// files never change size or go away while mounted.
const attrValid = time.Hour

// FS is the filesystem: a root directory holding one file per disk.
type FS struct {
	fuse.RawFileSystem
	opts  Options
	files []file
	uid   uint32
	gid   uint32
	start uint64
	// rr are the read results, one per buffer slot, so that answering a
	// read allocates nothing.
	rr []readResult
}

// file is one LUN's file.
type file struct {
	name string
	disk *remote.Disk
}

const rootIno = 1

// New makes the filesystem of disks, named lun<N>. Every disk must use
// the same Slots, of nslots slots.
func New(disks []*remote.Disk, nslots int, o Options) *FS {
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), opts: o,
		uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), start: uint64(time.Now().Unix()),
		rr: make([]readResult, nslots)}
	for _, d := range disks {
		fs.files = append(fs.files, file{name: fmt.Sprintf("lun%d", d.LUN()), disk: d})
	}
	return fs
}

// Files are the file names in the root, in LUN order.
func (fs *FS) Files() []string {
	var n []string
	for _, f := range fs.files {
		n = append(n, f.name)
	}
	return n
}

// Server is a mounted FS being served.
type Server struct {
	srv  *fuse.Server
	dir  string
	ring *ringServer // nil: every request comes through /dev/fuse
	dev  *devServer  // what serves /dev/fuse, if this package does
	// own: this package mounted dir and passed go-fuse the descriptor.
	own  bool
	done chan struct{}
}

// Mount mounts fs at dir (directly, without fusermount, which needs root)
// and serves it until Unmount: over io_uring or through /dev/fuse, as
// Options.IOURing says.
func (fs *FS) Mount(dir string) (*Server, error) {
	mode := fs.opts.IOURing
	if err := CheckIOURing(mode); err != nil {
		return nil, err
	}
	if mode == IOURingOff || mode == "" {
		return fs.mountClassic(dir)
	}
	if why := ringUnavailable(); why != nil {
		if mode == IOURingOn {
			return nil, fmt.Errorf("io_uring: on: %v", why)
		}
		log.Infof("%s: %v; requests come through /dev/fuse", dir, why)
		return fs.mountClassic(dir)
	}
	s, err := fs.mountRing(dir, mode == IOURingOn)
	if err != nil && mode != IOURingOn {
		log.Warnf("%s: FUSE over io_uring: %v; mounting with requests through /dev/fuse", dir, err)
		return fs.mountClassic(dir)
	}
	return s, err
}

// mountOptions are go-fuse's options for the mount, both ways.
func (fs *FS) mountOptions() *fuse.MountOptions {
	return &fuse.MountOptions{
		DirectMount:       true,
		MaxWrite:          fs.maxWrite(),
		MaxBackground:     128,
		AllowOther:        fs.opts.AllowOther,
		FsName:            "ddpstore:" + fs.opts.Name,
		Name:              "ddpstore",
		DisableXAttrs:     true,
		ExtraCapabilities: fuse.CAP_ASYNC_DIO,
		Debug:             fs.opts.Debug,
	}
}

// maxWrite is MaxWrite as go-fuse settles it: 128 KiB if unset, at most
// 1 MiB (256 pages).
func (fs *FS) maxWrite() int {
	switch mw := fs.opts.MaxWrite; {
	case mw <= 0:
		return 128 << 10
	case mw > 1<<20:
		return 1 << 20
	default:
		return mw
	}
}

// mountOwn mounts dir on a /dev/fuse descriptor of its own and lets
// go-fuse answer INIT on it ("/dev/fd/N", with mo's capabilities); the
// requests after INIT are for the caller to serve. go-fuse owns the
// descriptor from here: it closes it when its Serve ends, or when
// NewServer fails.
func (fs *FS) mountOwn(dir string, mo *fuse.MountOptions) (*Server, int, error) {
	fd, err := mountDev(dir, mo)
	if err != nil {
		return nil, -1, err
	}
	mo.DirectMount = false
	srv, err := fuse.NewServer(fs, fmt.Sprintf("/dev/fd/%d", fd), mo)
	if err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		return nil, -1, err
	}
	return &Server{srv: srv, dir: dir, own: true, done: make(chan struct{})}, fd, nil
}

// serveDev serves the requests that come through /dev/fuse (dev.go),
// its workers reading into the disks' slots when ownSlots (not when the
// io_uring queues take the pool's slots). When the connection has ended
// go-fuse's Serve closes its descriptor, then after runs (if not nil),
// then Wait returns. An error leaves the mount served by go-fuse alone,
// for the caller to abandon.
//
// (newDevServer returns a nil server with its error.)
func (s *Server) serveDev(fs *FS, fd, maxWrite int, ownSlots bool, after func()) error {
	dev, err := newDevServer(fs, fd, maxWrite, ownSlots)
	s.dev = dev
	go func() {
		if dev != nil {
			dev.wait()
		}
		s.srv.Serve()
		if after != nil {
			after()
		}
		close(s.done)
	}()
	return err
}

// mountClassic mounts dir and serves it through /dev/fuse (dev.go).
func (fs *FS) mountClassic(dir string) (*Server, error) {
	mo := fs.mountOptions()
	s, fd, err := fs.mountOwn(dir, mo)
	if err != nil {
		return nil, err
	}
	if err := s.serveDev(fs, fd, mo.MaxWrite, true, nil); err != nil {
		s.abandon()
		return nil, err
	}
	if err := fs.pollHack(dir); err != nil {
		s.abandon()
		return nil, err
	}
	return s, nil
}

// mountRing mounts dir with FUSE_OVER_IO_URING among the capabilities
// INIT answers, then registers the ring's queues. A kernel that does not
// offer the capability leaves the mount served through /dev/fuse, which
// is an error when required.
func (fs *FS) mountRing(dir string, required bool) (*Server, error) {
	nq, err := possibleCPUs()
	if err != nil {
		return nil, fmt.Errorf("the number of queues: %v", err)
	}
	mo := fs.mountOptions()
	mo.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	s, fd, err := fs.mountOwn(dir, mo)
	if err != nil {
		return nil, err
	}
	srv := s.srv
	if srv.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		if err := s.serveDev(fs, fd, mo.MaxWrite, true, nil); err != nil {
			s.abandon()
			return nil, err
		}
		if required {
			s.abandon()
			return nil, errors.New("io_uring: on: the kernel's INIT does not offer FUSE_OVER_IO_URING")
		}
		if err := fs.pollHack(dir); err != nil {
			s.abandon()
			return nil, err
		}
		log.Infof("%s: the kernel's INIT does not offer FUSE over io_uring; requests come through /dev/fuse", dir)
		return s, nil
	}
	// From here the kernel holds every request until each queue has an
	// entry; a REGISTER that fails sends them back to /dev/fuse.
	payload := max(mo.MaxWrite, 8192) + os.Getpagesize()
	depth := max(1, min(maxRingDepth, len(fs.rr), ringMemory/(nq*payload)))
	ring, err := newRingServer(fs, fd, nq, depth, payload)
	if ring == nil {
		go func() { srv.Serve(); close(s.done) }()
		s.abandon()
		return nil, err
	}
	s.ring = ring
	// Each queue's reaper waits in io_uring_enter on a thread of its own.
	hostdev.BlockingProcs()
	// /dev/fuse still carries FORGET and INTERRUPT, and every request
	// if a REGISTER failed.
	if derr := s.serveDev(fs, fd, mo.MaxWrite, false, func() { ring.stop(5 * time.Second) }); derr != nil {
		s.abandon()
		return nil, derr
	}
	if err != nil && required {
		s.abandon()
		return nil, err
	}
	if err := fs.pollHack(dir); err != nil {
		s.abandon()
		return nil, err
	}
	if err != nil { // a REGISTER failed: the kernel keeps to /dev/fuse
		log.Warnf("%s: %v; requests come through /dev/fuse", dir, err)
		return s, nil
	}
	log.Infof("%s: FUSE over io_uring, %d queues of %d entries", dir, nq, depth)
	return s, nil
}

// pollHack has the kernel learn, before anything else opens a file of the
// mount, that the filesystem does not poll: it polls a file once, with
// system calls of its own, and POLL is answered ENOSYS. Otherwise the
// first POLL would come from this process's Go runtime, which registers
// every file it opens with its epoll instance in a system call that keeps
// the runtime from stopping the world until it returns: a garbage
// collection starting then would wait for the answer while keeping the
// goroutines that give it from running. go-fuse does the same when it
// mounts (WaitMount), but not on a /dev/fd/N mount.
func (fs *FS) pollHack(dir string) error {
	if len(fs.files) == 0 {
		return nil // no file to open: no file to poll
	}
	path := dir + "/" + fs.files[0].name
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0); err != nil {
		return &os.PathError{Op: "poll", Path: path, Err: err}
	}
	return nil
}

// mountDev opens /dev/fuse and mounts it on dir as go-fuse's direct
// mount would, and returns the descriptor.
func mountDev(dir string, mo *fuse.MountOptions) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return -1, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: "/dev/fuse", Err: err}
	}
	data := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d,max_read=%d", fd, st.Mode&unix.S_IFMT, os.Geteuid(), os.Getegid(), mo.MaxWrite)
	if mo.AllowOther {
		data += ",allow_other"
	}
	if err := unix.Mount(mo.FsName, dir, "fuse."+mo.Name, unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount on %s: %w", dir, err)
	}
	return fd, nil
}

// IOURing says whether requests come over io_uring.
func (s *Server) IOURing() bool { return s.ring != nil }

// RingRequests is the number of requests answered over io_uring.
func (s *Server) RingRequests() uint64 {
	if s.ring == nil {
		return 0
	}
	return s.ring.requests.Load()
}

// Unmount unmounts the filesystem and waits until serving has ended; a
// busy mount stays mounted and served, and the error says so.
func (s *Server) Unmount() error {
	if !s.own {
		if err := s.srv.Unmount(); err != nil {
			return err
		}
		<-s.done
		return nil
	}
	var err error
	delay := time.Duration(0)
	for range 5 { // as go-fuse: the kernel may not yet have seen every close
		if err = unix.Unmount(s.dir, 0); err == nil || err == unix.EINVAL {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	if err != nil && err != unix.EINVAL { // EINVAL: no longer mounted
		return err // the errno alone, as go-fuse's Unmount returns it
	}
	<-s.done
	return nil
}

// abandon unmounts a mount that failed to set up, and detaches it should
// it be busy already.
func (s *Server) abandon() {
	if err := s.Unmount(); err != nil {
		log.Warnf("unmount %s: %v; detaching it", s.dir, err)
		unix.Unmount(s.dir, unix.MNT_DETACH)
	}
}

// Wait waits until serving has ended: the filesystem was unmounted.
func (s *Server) Wait() { <-s.done }

func (fs *FS) String() string { return "ddpstore" }

// lookupFile finds the file of inode ino.
func (fs *FS) lookupFile(ino uint64) (*file, bool) {
	i := int(ino) - rootIno - 1
	if i < 0 || i >= len(fs.files) {
		return nil, false
	}
	return &fs.files[i], true
}

// attr fills the attributes of inode ino.
func (fs *FS) attr(ino uint64, a *fuse.Attr) fuse.Status {
	*a = fuse.Attr{Ino: ino, Atime: fs.start, Mtime: fs.start, Ctime: fs.start, Owner: fuse.Owner{Uid: fs.uid, Gid: fs.gid}}
	if ino == rootIno {
		a.Mode, a.Nlink = syscall.S_IFDIR|0o755, 2
		return fuse.OK
	}
	f, ok := fs.lookupFile(ino)
	if !ok {
		return fuse.ENOENT
	}
	a.Mode, a.Nlink = syscall.S_IFREG|0o644, 1
	if f.disk.ReadOnly() {
		a.Mode = syscall.S_IFREG | 0o444
	}
	a.Size = uint64(f.disk.Size())
	a.Blocks = a.Size / 512
	a.Blksize = uint32(max(f.disk.BlockSize(), 4096))
	return fuse.OK
}

func (fs *FS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if h.NodeId != rootIno {
		return fuse.ENOTDIR
	}
	for i := range fs.files {
		if fs.files[i].name == name {
			ino := uint64(rootIno + 1 + i)
			out.NodeId = ino
			out.SetEntryTimeout(attrValid)
			out.SetAttrTimeout(attrValid)
			return fs.attr(ino, &out.Attr)
		}
	}
	return fuse.ENOENT
}

func (fs *FS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	out.SetTimeout(attrValid)
	return fs.attr(in.NodeId, &out.Attr)
}

// SetAttr allows what does not change a disk: times are accepted and
// ignored, a truncate to the present size does nothing; anything else
// (resizing, chmod, chown) is refused.
func (fs *FS) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if st := fs.attr(in.NodeId, &out.Attr); !st.Ok() {
		return st
	}
	if sz, ok := in.GetSize(); ok && sz != out.Size {
		return fuse.Status(syscall.EPERM)
	}
	if _, ok := in.GetMode(); ok {
		return fuse.Status(syscall.EPERM)
	}
	if _, ok := in.GetUID(); ok {
		return fuse.Status(syscall.EPERM)
	}
	if _, ok := in.GetGID(); ok {
		return fuse.Status(syscall.EPERM)
	}
	out.SetTimeout(attrValid)
	return fuse.OK
}

func (fs *FS) Access(_ <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if in.NodeId == rootIno {
		return fuse.OK
	}
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return fuse.ENOENT
	}
	if in.Mask&2 != 0 && f.disk.ReadOnly() { // W_OK
		return fuse.Status(syscall.EROFS)
	}
	return fuse.OK
}

func (fs *FS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return fuse.ENOENT
	}
	if in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY && f.disk.ReadOnly() {
		return fuse.Status(syscall.EROFS)
	}
	if in.Flags&syscall.O_TRUNC != 0 && f.disk.Size() != 0 {
		return fuse.Status(syscall.EPERM)
	}
	if fs.opts.DirectIO {
		out.OpenFlags = fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	} else {
		out.OpenFlags = fuse.FOPEN_KEEP_CACHE
	}
	return fuse.OK
}

// Read answers from the slot the target placed the data in; the slot goes
// back after go-fuse has written the reply (readResult.Done).
func (fs *FS) Read(_ <-chan struct{}, in *fuse.ReadIn, _ []byte) (fuse.ReadResult, fuse.Status) {
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return nil, fuse.ENOENT
	}
	sl, err := f.disk.Read(context.Background(), int64(in.Offset), int(in.Size))
	if err != nil {
		if isEOF(err) {
			return fuse.ReadResultData(nil), fuse.OK
		}
		return nil, fuse.Status(remote.Errno(err))
	}
	r := &fs.rr[sl.Index()]
	r.sl = sl
	r.iov[0] = sl.Bytes()
	return r, fuse.OK
}

func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return fs.Writev(cancel, in, [][]byte{data})
}

// Writev copies the request's data into a registered slot (the one copy on
// the write path: the kernel's buffer is not registered) and writes it.
func (fs *FS) Writev(_ <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return 0, fuse.ENOENT
	}
	n, err := f.disk.Write(context.Background(), int64(in.Offset), data...)
	if err != nil {
		return 0, fuse.Status(remote.Errno(err))
	}
	return uint32(n), fuse.OK
}

// Fsync sends SYNCHRONIZE CACHE: every write acknowledged before it is
// then durable on the target's store.
func (fs *FS) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return fuse.ENOENT
	}
	if err := f.disk.Sync(context.Background()); err != nil {
		return fuse.Status(remote.Errno(err))
	}
	return fuse.OK
}

// Flush (each close) has nothing to do: no data waits in this process.
func (fs *FS) Flush(<-chan struct{}, *fuse.FlushIn) fuse.Status { return fuse.OK }

func (fs *FS) Release(<-chan struct{}, *fuse.ReleaseIn) {}

// Fallocate accepts a plain allocation inside the disk (every block of a
// disk exists) and refuses the rest.
func (fs *FS) Fallocate(_ <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	f, ok := fs.lookupFile(in.NodeId)
	if !ok {
		return fuse.ENOENT
	}
	if in.Mode != 0 {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	if in.Offset+in.Length > uint64(f.disk.Size()) {
		return fuse.Status(syscall.ENOSPC)
	}
	return fuse.OK
}

func (fs *FS) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, _ *fuse.OpenOut) fuse.Status {
	if in.NodeId != rootIno {
		return fuse.ENOTDIR
	}
	return fuse.OK
}

// entries are the root's directory entries from offset off.
func (fs *FS) entries(off uint64, add func(fuse.DirEntry) bool) {
	all := len(fs.files) + 2
	for i := int(off); i < all; i++ {
		e := fuse.DirEntry{Mode: syscall.S_IFDIR, Off: uint64(i + 1)}
		switch i {
		case 0:
			e.Name, e.Ino = ".", rootIno
		case 1:
			e.Name, e.Ino = "..", rootIno
		default:
			e.Name, e.Ino, e.Mode = fs.files[i-2].name, uint64(rootIno+i-1), syscall.S_IFREG
		}
		if !add(e) {
			return
		}
	}
}

func (fs *FS) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	fs.entries(in.Offset, out.AddDirEntry)
	return fuse.OK
}

func (fs *FS) ReadDirPlus(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	fs.entries(in.Offset, func(e fuse.DirEntry) bool {
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return false
		}
		if e.Name != "." && e.Name != ".." {
			eo.NodeId = e.Ino
			eo.SetEntryTimeout(attrValid)
			eo.SetAttrTimeout(attrValid)
			fs.attr(e.Ino, &eo.Attr)
		}
		return true
	})
	return fuse.OK
}

func (fs *FS) ReleaseDir(*fuse.ReleaseIn) {}

func (fs *FS) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	var total uint64
	for _, f := range fs.files {
		total += uint64(f.disk.Size())
	}
	*out = fuse.StatfsOut{Blocks: total / 4096, Bsize: 4096, Frsize: 4096, Files: uint64(len(fs.files)), NameLen: 255}
	return fuse.OK
}

// readResult is a read's reply: the slot's data, handed to the kernel in
// one writev with the reply header.
type readResult struct {
	sl  *remote.Slot
	iov [1][]byte
}

func (r *readResult) Bytes([]byte) ([]byte, fuse.Status) { return r.iov[0], fuse.OK }
func (r *readResult) Size() int                          { return len(r.iov[0]) }

// Slices makes go-fuse write the slot itself (its withSlice path) rather
// than copy it into a buffer of its own or a splice pipe.
func (r *readResult) Slices() ([][]byte, fuse.Status) { return r.iov[:], fuse.OK }

// Done releases the slot after the reply is written.
func (r *readResult) Done() {
	sl := r.sl
	r.sl, r.iov[0] = nil, nil
	if sl != nil {
		sl.Release()
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
