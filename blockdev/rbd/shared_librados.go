//go:build cgo

package rbd

/*
#cgo LDFLAGS: -lrados
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <rados/librados.h>

// Exported by shared_callback.go.
extern void ddpSharedNotify(uintptr_t h, uint64_t notify_id, uint64_t cookie, void *data, size_t len);
extern void ddpSharedWatchError(uintptr_t h, uint64_t cookie, int err);

static void ddp_shared_watchcb(void *arg, uint64_t notify_id, uint64_t cookie, uint64_t notifier, void *data, size_t len) {
	ddpSharedNotify((uintptr_t)arg, notify_id, cookie, data, len);
}

static void ddp_shared_errcb(void *arg, uint64_t cookie, int err) {
	ddpSharedWatchError((uintptr_t)arg, cookie, err);
}

static int ddp_shared_watch(rados_ioctx_t io, const char *oid, uint32_t timeout, uintptr_t h, uint64_t *cookie) {
	return rados_watch3(io, oid, cookie, ddp_shared_watchcb, ddp_shared_errcb, timeout, (void *)h);
}

// ddp_shared_load reads the object's size, its first len octets into buf
// and its version, in one read op. The caller holds the I/O context's
// mutex: the version is the context's last one.
static int ddp_shared_load(rados_ioctx_t io, const char *oid, char *buf, size_t len, uint64_t *size, size_t *got, uint64_t *ver) {
	int rs = 0, rr = 0;
	rados_read_op_t op = rados_create_read_op();
	rados_read_op_stat(op, size, NULL, &rs);
	rados_read_op_read(op, 0, len, buf, got, &rr);
	int r = rados_read_op_operate(op, io, oid, 0);
	rados_release_read_op(op);
	if (r < 0)
		return r;
	if (rs < 0)
		return rs;
	if (rr < 0)
		return rr;
	*ver = rados_get_last_version(io);
	return 0;
}

// ddp_shared_store replaces the object's content if it is at version ver
// (0: if it does not exist), in one write op, and gives its new version.
// The caller holds the I/O context's mutex.
static int ddp_shared_store(rados_ioctx_t io, const char *oid, const char *buf, size_t len, uint64_t ver, uint64_t *newver) {
	rados_write_op_t op = rados_create_write_op();
	if (ver == 0)
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	else
		rados_write_op_assert_version(op, ver);
	rados_write_op_write_full(op, buf, len);
	int r = rados_write_op_operate(op, io, oid, NULL, 0);
	rados_release_write_op(op);
	if (r == 0)
		*newver = rados_get_last_version(io);
	return r;
}

// ddp_shared_create creates the object empty unless it exists (-EEXIST).
static int ddp_shared_create(rados_ioctx_t io, const char *oid) {
	rados_write_op_t op = rados_create_write_op();
	rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	int r = rados_write_op_operate(op, io, oid, NULL, 0);
	rados_release_write_op(op);
	return r;
}

// ddp_shared_notify notifies the object's watchers and waits for their
// acknowledgements, counting the watchers and those that timed out.
static int ddp_shared_notify(rados_ioctx_t io, const char *oid, const char *buf, int len, uint64_t timeout_ms, size_t *watchers, size_t *late) {
	char *reply = NULL;
	size_t reply_len = 0;
	*watchers = 0;
	*late = 0;
	int r = rados_notify2(io, oid, buf, len, timeout_ms, &reply, &reply_len);
	if (reply != NULL) {
		struct notify_ack_t *acks = NULL;
		struct notify_timeout_t *timeouts = NULL;
		size_t nacks = 0, ntimeouts = 0;
		if (rados_decode_notify_response(reply, reply_len, &acks, &nacks, &timeouts, &ntimeouts) == 0) {
			*watchers = nacks + ntimeouts;
			*late = ntimeouts;
			rados_free_notify_response(acks, nacks, timeouts);
		}
		rados_buffer_free(reply);
	}
	return r;
}
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// sharedConn is a Shared's librados handles.
type sharedConn struct {
	cluster C.rados_t
	// mu serialises the operations on data, whose version is read from
	// the context after each (rados_get_last_version is the context's).
	mu   sync.Mutex
	data C.rados_ioctx_t
	// wio carries the watch, the notifies and their acknowledgements,
	// none of which needs a version: they run concurrently.
	wio C.rados_ioctx_t
	oid *C.char // the object's name, for the callbacks' acknowledgements
	h   cgo.Handle
}

// open connects as client.cfg.User and opens two I/O contexts on
// cfg.Pool; on error nothing is left open.
func (c *sharedConn) open(cfg Config) (err error) {
	if c.cluster, err = connect(cfg); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	pool := C.CString(cfg.Pool)
	defer C.free(unsafe.Pointer(pool))
	if r := C.rados_ioctx_create(c.cluster, pool, &c.data); r < 0 {
		c.data = nil
		return fmt.Errorf("pool %s: %w", cfg.Pool, errno(r))
	}
	if r := C.rados_ioctx_create(c.cluster, pool, &c.wio); r < 0 {
		c.wio = nil
		return fmt.Errorf("pool %s: %w", cfg.Pool, errno(r))
	}
	return nil
}

// close releases everything open left; the watch is over (unwatch and
// flush) and no operation is in flight.
func (c *sharedConn) close() {
	if c.data != nil {
		C.rados_ioctx_destroy(c.data)
		c.data = nil
	}
	if c.wio != nil {
		C.rados_ioctx_destroy(c.wio)
		c.wio = nil
	}
	if c.cluster != nil {
		C.rados_shutdown(c.cluster)
		c.cluster = nil
	}
	if c.oid != nil {
		C.free(unsafe.Pointer(c.oid))
		c.oid = nil
	}
	if c.h != 0 {
		c.h.Delete()
		c.h = 0
	}
}

// sharedLoadSize is what a load reads at first; a larger object is read
// again with its size.
const sharedLoadSize = 4096

func (c *sharedConn) load(name string) ([]byte, uint64, error) {
	oid := C.CString(name)
	defer C.free(unsafe.Pointer(oid))
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := make([]byte, sharedLoadSize)
	for {
		var size, ver C.uint64_t
		var got C.size_t
		if r := C.ddp_shared_load(c.data, oid, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &size, &got, &ver); r < 0 {
			return nil, 0, errno(r)
		}
		if uint64(size) <= uint64(len(buf)) {
			return buf[:got], uint64(ver), nil
		}
		buf = make([]byte, size) // grew between two loads: read it whole
	}
}

func (c *sharedConn) store(name string, state []byte, version uint64) (uint64, error) {
	oid := C.CString(name)
	defer C.free(unsafe.Pointer(oid))
	var buf *C.char
	if len(state) > 0 {
		buf = (*C.char)(unsafe.Pointer(&state[0]))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ver C.uint64_t
	if r := C.ddp_shared_store(c.data, oid, buf, C.size_t(len(state)), C.uint64_t(version), &ver); r < 0 {
		return 0, errno(r)
	}
	return uint64(ver), nil
}

func (c *sharedConn) create(name string) error {
	oid := C.CString(name)
	defer C.free(unsafe.Pointer(oid))
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := C.ddp_shared_create(c.data, oid); r < 0 {
		return errno(r)
	}
	return nil
}

// watch registers a watch whose callbacks reach s through the handle
// made at the first call.
func (c *sharedConn) watch(s *Shared, name string, timeout time.Duration) (uint64, error) {
	if c.h == 0 {
		c.h = cgo.NewHandle(s)
		c.oid = C.CString(name)
	}
	var cookie C.uint64_t
	if r := C.ddp_shared_watch(c.wio, c.oid, C.uint32_t(timeout/time.Second), C.uintptr_t(c.h), &cookie); r < 0 {
		return 0, errno(r)
	}
	return uint64(cookie), nil
}

func (c *sharedConn) unwatch(cookie uint64) error {
	if r := C.rados_unwatch2(c.wio, C.uint64_t(cookie)); r < 0 {
		return errno(r)
	}
	return nil
}

// flush waits for the watch callbacks librados has queued.
func (c *sharedConn) flush() error {
	if r := C.rados_watch_flush(c.cluster); r < 0 {
		return errno(r)
	}
	return nil
}

// ack acknowledges a notify; called from a watch callback or from the
// watch goroutine, always before close.
func (c *sharedConn) ack(_ string, notifyID, cookie uint64) error {
	if r := C.rados_notify_ack(c.wio, c.oid, C.uint64_t(notifyID), C.uint64_t(cookie), nil, 0); r < 0 {
		return errno(r)
	}
	return nil
}

// notify notifies the object's watchers with payload and waits for all of
// them up to timeout, rounded up to whole seconds: librados hands the OSD
// timeout_ms/1000 seconds, and 0 means the OSD's default (30 s). It
// returns how many watchers there were and how many timed out.
func (c *sharedConn) notify(name string, payload []byte, timeout time.Duration) (watchers, late int, err error) {
	oid := C.CString(name)
	defer C.free(unsafe.Pointer(oid))
	var w, l C.size_t
	r := C.ddp_shared_notify(c.wio, oid, (*C.char)(unsafe.Pointer(&payload[0])), C.int(len(payload)), C.uint64_t((timeout+time.Second-1)/time.Second*1000), &w, &l)
	if r < 0 {
		return int(w), int(l), errno(r)
	}
	return int(w), int(l), nil
}
