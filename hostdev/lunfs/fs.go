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
package lunfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/hanwen/go-fuse/v2/fuse"
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

// Mount mounts fs at dir (directly, without fusermount, which needs root)
// and serves it until Unmount.
func (fs *FS) Mount(dir string) (*fuse.Server, error) {
	mo := &fuse.MountOptions{
		DirectMount:       true,
		MaxWrite:          fs.opts.MaxWrite,
		MaxBackground:     128,
		AllowOther:        fs.opts.AllowOther,
		FsName:            "ddpstore:" + fs.opts.Name,
		Name:              "ddpstore",
		DisableXAttrs:     true,
		ExtraCapabilities: fuse.CAP_ASYNC_DIO,
		Debug:             fs.opts.Debug,
	}
	srv, err := fuse.NewServer(fs, dir, mo)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	return srv, nil
}

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
