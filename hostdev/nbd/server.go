package nbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	log "github.com/sirupsen/logrus"
)

// MaxRequest is the longest read or write served (the kernel's NBD
// queue sends at most 65536 sectors, 32 MiB, in one request).
const MaxRequest = 32 << 20

// ErrDisconnected is what Serve returns after the client's NBD_CMD_DISC.
var ErrDisconnected = errors.New("nbd: the client disconnected")

// Server serves one LUN over NBD connections, one at a time.
type Server struct {
	lun      *LUN
	inFlight int
	log      *log.Entry
	bufs     sync.Pool // payloads longer than one slot, and write data
}

// NewServer serves lun with up to inFlight requests executing at once.
func NewServer(lun *LUN, inFlight int, l *log.Entry) *Server {
	if l == nil {
		l = log.NewEntry(log.StandardLogger())
	}
	return &Server{lun: lun, inFlight: max(inFlight, 1), log: l}
}

// Flags are the transmission flags this server offers for its LUN.
func (s *Server) Flags() uint64 {
	f := uint64(FlagHasFlags | FlagSendFlush | FlagSendTrim | FlagSendWriteZeroes)
	if s.lun.ReadOnly() {
		f |= FlagReadOnly
	}
	return f
}

// conn is one connection being served: replies go out whole, one at a
// time.
type conn struct {
	c  net.Conn
	mu sync.Mutex
}

func (c *conn) reply(handle uint64, errno uint32, data []byte) error {
	var hdr [SimpleReplyLen]byte
	Reply{Error: errno, Handle: handle}.Encode(hdr[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	if errno != 0 || len(data) == 0 {
		_, err := c.c.Write(hdr[:])
		return err
	}
	bufs := net.Buffers{hdr[:], data}
	_, err := bufs.WriteTo(c.c)
	return err
}

// Serve reads requests from c and answers them until the client sends
// NBD_CMD_DISC (ErrDisconnected), c fails or ctx ends. Requests execute
// concurrently; Serve returns once every one of them has been answered
// (or found c closed).
func (s *Server) Serve(ctx context.Context, c net.Conn) error {
	cn := &conn{c: c}
	sem := make(chan struct{}, s.inFlight)
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer wg.Wait() // before stop: what is in flight is answered first
	var hdr [RequestLen]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("nbd: reading a request: %w", err)
		}
		req, err := ParseRequest(hdr[:])
		if err != nil {
			return err
		}
		if req.Type == CmdDisc {
			return ErrDisconnected
		}
		var payload []byte
		if req.HasPayload() {
			if req.Length > MaxRequest {
				return fmt.Errorf("nbd: a %d-octet write is longer than %d", req.Length, MaxRequest)
			}
			payload = s.buf(int(req.Length))
			if _, err := io.ReadFull(c, payload); err != nil {
				s.put(payload)
				return fmt.Errorf("nbd: reading a write's data: %w", err)
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.handle(ctx, cn, req, payload); err != nil {
				s.log.Debugf("nbd: reply to %s: %v", CmdName(req.Type), err)
				c.Close() // the reader sees it and Serve returns
			}
		}()
	}
}

// handle executes one request and sends its reply.
func (s *Server) handle(ctx context.Context, c *conn, req Request, payload []byte) error {
	if payload != nil {
		defer s.put(payload)
	}
	off, n := int64(req.Offset), int64(req.Length)
	size := s.lun.Size()
	if req.Offset > uint64(size) || n > size-off {
		switch req.Type {
		case CmdRead, CmdWrite, CmdTrim, CmdWriteZeroes, CmdCache:
			errno := uint32(EINVAL)
			if req.Type == CmdWrite || req.Type == CmdWriteZeroes {
				errno = ENOSPC
			}
			return c.reply(req.Handle, errno, nil)
		}
	}
	var err error
	switch req.Type {
	case CmdRead:
		if n > MaxRequest {
			return c.reply(req.Handle, EOVERFLOW, nil)
		}
		if n <= int64(s.lun.MaxIO()) {
			// One slot: the data goes from the buffer the target
			// placed it in to the socket.
			if n == 0 {
				return c.reply(req.Handle, 0, nil)
			}
			var sl *remote.Slot
			if sl, err = s.lun.Read(ctx, off, int(n)); err == nil {
				defer sl.Release()
				return c.reply(req.Handle, 0, sl.Bytes())
			}
			break
		}
		p := s.buf(int(n))
		defer s.put(p)
		if err = s.lun.ReadInto(ctx, p, off); err == nil {
			return c.reply(req.Handle, 0, p)
		}
	case CmdWrite:
		if s.lun.ReadOnly() {
			return c.reply(req.Handle, EPERM, nil)
		}
		err = s.lun.WriteFrom(ctx, payload, off)
		if err == nil && req.Flags&CmdFlagFUA != 0 {
			err = s.lun.Sync(ctx)
		}
	case CmdFlush:
		err = s.lun.Sync(ctx)
	case CmdTrim:
		err = s.lun.Discard(ctx, off, n)
	case CmdWriteZeroes:
		err = s.lun.WriteZeroes(ctx, off, n, req.Flags&CmdFlagNoHole == 0)
	case CmdCache:
		// A hint; nothing to prefetch into.
	default:
		return c.reply(req.Handle, EINVAL, nil)
	}
	if err != nil {
		s.log.Warnf("nbd: %s of %d octets at %d: %v", CmdName(req.Type), n, off, err)
		return c.reply(req.Handle, errnoOf(err), nil)
	}
	return c.reply(req.Handle, 0, nil)
}

// errnoOf is the reply error for a failed operation.
func errnoOf(err error) uint32 {
	switch remote.Errno(err) {
	case syscall.EROFS, syscall.EPERM:
		return EPERM
	case syscall.EINVAL:
		return EINVAL
	case syscall.ENOSPC:
		return ENOSPC
	case syscall.EOPNOTSUPP:
		return ENOTSUP
	case syscall.ENOMEM:
		return ENOMEM
	}
	return EIO
}

func (s *Server) buf(n int) []byte {
	if b, ok := s.bufs.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n, max(n, 1<<20))
}

func (s *Server) put(b []byte) {
	if cap(b) <= MaxRequest {
		s.bufs.Put(&b)
	}
}
