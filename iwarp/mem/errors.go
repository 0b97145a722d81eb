package mem

import "errors"

// Errors of mapping and registration. They are wrapped with detail (the file,
// the offending numbers), so test for them with errors.Is.
var (
	// ErrSize: a mapping or region length is zero, negative or too large.
	ErrSize = errors.New("invalid size")
	// ErrAlignment: a file offset is not a multiple of the page size.
	ErrAlignment = errors.New("offset not page aligned")
	// ErrRange: an offset and length reach past the end of a file or mapping.
	ErrRange = errors.New("range out of bounds")
	// ErrFileType: the file is neither a regular file nor a block device.
	ErrFileType = errors.New("not a regular file or block device")
	// ErrClosed: the mapping has been closed.
	ErrClosed = errors.New("mapping closed")
	// ErrBusy: the mapping still has registered memory regions.
	ErrBusy = errors.New("memory regions still registered")
	// ErrNotFile: a file operation (Sync) on an anonymous mapping.
	ErrNotFile = errors.New("not a file-backed mapping")
	// ErrReadOnly: write access was asked of a read-only mapping.
	ErrReadOnly = errors.New("mapping is read-only")
	// ErrAccess: an invalid combination of access rights.
	ErrAccess = errors.New("invalid access rights")
	// ErrPD: the zero PD, which no registration may use.
	ErrPD = errors.New("invalid protection domain")
	// ErrNoSTags: every STag index of the table is in use.
	ErrNoSTags = errors.New("no free STag index")
	// ErrForeign: an MR was passed to a Table it was not registered with.
	ErrForeign = errors.New("memory region of another table")
)
