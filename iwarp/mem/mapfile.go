package mem

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Mode says whether a file is mapped for reading only or for reading and
// writing.
type Mode uint8

// The file mapping modes.
const (
	ReadOnly Mode = iota
	ReadWrite
)

// FileError is an error of MapFile; it names the file.
type FileError struct {
	Path   string
	Detail string // what is wrong, with the offending numbers
	Err    error  // one of the package's sentinels, or the system call's error
}

func (e *FileError) Error() string {
	return "mem: map " + e.Path + ": " + e.Detail + ": " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// MapFile maps length bytes at offset off of the regular file or block device
// at path, shared with the file: stores through a ReadWrite mapping reach the
// file (durably after Sync), and a ReadOnly mapping cannot be written at all.
// off must be a multiple of the page size; length 0 maps to the end of the
// file. The range must lie inside the file: memory past its end would raise
// SIGBUS when touched, as it will if the file is truncated under the mapping.
// Pages are faulted in on first use.
func MapFile(path string, off int64, length int, mode Mode) (*Mapping, error) {
	fail := func(err error, format string, args ...any) (*Mapping, error) {
		return nil, &FileError{Path: path, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	if off < 0 || off%int64(pageSize) != 0 {
		return fail(ErrAlignment, "offset %d is not a multiple of the page size %d", off, pageSize)
	}
	if length < 0 {
		return fail(ErrSize, "length %d", length)
	}
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if mode == ReadWrite {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return fail(errors.Unwrap(err), "open")
	}
	defer f.Close() // the mapping keeps its own reference to the file
	st, err := f.Stat()
	if err != nil {
		return fail(err, "stat")
	}
	var size int64
	switch m := st.Mode(); {
	case m.IsRegular():
		size = st.Size()
	case m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0:
		if size, err = f.Seek(0, io.SeekEnd); err != nil { // a block device's stat size is 0
			return fail(err, "block device size")
		}
	default:
		return fail(ErrFileType, "file mode %v", m)
	}
	if length == 0 {
		if off >= size {
			return fail(ErrRange, "offset %d is at or past the end (size %d)", off, size)
		}
		length = int(min(size-off, int64(maxLen)))
	}
	if int64(length) > size-off {
		return fail(ErrRange, "bytes [%d, %d) reach past the end (size %d)", off, off+int64(length), size)
	}
	b, err := unix.Mmap(int(f.Fd()), off, length, prot, unix.MAP_SHARED)
	if err != nil {
		return fail(err, "mmap %d bytes at offset %d", length, off)
	}
	return &Mapping{data: b, name: path, writable: mode == ReadWrite, file: true}, nil
}

// maxLen bounds one mapping so that lengths and offsets fit an int.
const maxLen = int(^uint(0) >> 1)
