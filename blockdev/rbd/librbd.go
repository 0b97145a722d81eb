//go:build cgo

package rbd

/*
#cgo LDFLAGS: -lrbd -lrados
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

// Exported by complete.go.
extern void ddpRBDComplete(uintptr_t req, ssize_t ret);

// ddp_rbd_complete runs on a librbd thread when a request completes: it
// hands the request's result to the Go side and releases the completion.
static void ddp_rbd_complete(rbd_completion_t c, void *arg) {
	ssize_t r = rbd_aio_get_return_value(c);
	rbd_aio_release(c);
	ddpRBDComplete((uintptr_t)arg, r);
}

// ddp_rbd_submit starts request op (numbered as rbd.go's ops) whose
// completion calls back with req. It returns a negative errno when the
// request could not be started, and then there will be no callback.
static int ddp_rbd_submit(rbd_image_t img, int op, uint64_t off, uint64_t len, char *buf, uintptr_t req) {
	rbd_completion_t c;
	int r = rbd_aio_create_completion((void *)req, ddp_rbd_complete, &c);
	if (r < 0)
		return r;
	switch (op) {
	case 0: r = rbd_aio_read(img, off, len, buf, c); break;
	case 1: r = rbd_aio_write(img, off, len, buf, c); break;
	case 2: r = rbd_aio_flush(img, c); break;
	case 3: // discard: write zeroes, see the package's documentation
	case 4: r = rbd_aio_write_zeroes(img, off, len, c, 0, 0); break;
	default: r = -22;
	}
	if (r < 0)
		rbd_aio_release(c);
	return r;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"syscall"
	"unsafe"
)

// conn is an image's librados and librbd handles, and the requests it
// keeps for reuse.
type conn struct {
	cluster C.rados_t
	ioctx   C.rados_ioctx_t
	img     C.rbd_image_t

	mu   sync.Mutex
	free []*request // requests not in flight
	all  []*request // every request made, whose handles Close deletes
}

// request is one asynchronous librbd request in flight: the completion
// callback finds it through its handle and sends the result on done.
type request struct {
	h    cgo.Handle
	done chan int64
	pin  runtime.Pinner
}

// errno turns librados's and librbd's negative return values into errors.
func errno(r C.int) error { return syscall.Errno(-r) }

// open connects and opens the image; on error nothing is left open.
func (c *conn) open(cfg Config) (size int64, err error) {
	// No librbd cache, whatever the conf says: a write is answered when
	// the cluster has it. With writeback caching (librbd's default after
	// the first flush) a gateway killed before flushing would lose writes
	// it had acknowledged, and another gateway exporting the image would
	// read stale blocks.
	//
	// A cluster that cannot be reached fails Open after 30 s rather than
	// librados's 300 (a gateway's start says so, instead of hanging).
	if c.cluster, err = connect(cfg, [2]string{"rbd_cache", "false"}, [2]string{"client_mount_timeout", "30"}); err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			c.shutdown()
		}
	}()
	pool := C.CString(cfg.Pool)
	defer C.free(unsafe.Pointer(pool))
	if r := C.rados_ioctx_create(c.cluster, pool, &c.ioctx); r < 0 {
		return 0, fmt.Errorf("pool %s: %w", cfg.Pool, errno(r))
	}
	name := C.CString(cfg.Image)
	defer C.free(unsafe.Pointer(name))
	var r C.int
	if cfg.ReadOnly {
		r = C.rbd_open_read_only(c.ioctx, name, &c.img, nil)
	} else {
		r = C.rbd_open(c.ioctx, name, &c.img, nil)
	}
	if r < 0 {
		c.img = nil
		return 0, errno(r)
	}
	var sz C.uint64_t
	if r := C.rbd_get_size(c.img, &sz); r < 0 {
		return 0, fmt.Errorf("size: %w", errno(r))
	}
	return int64(sz), nil
}

// connect makes a cluster handle for client.cfg.User, reads cfg.Conf,
// sets cfg.Keyring and the options given, and connects: what the image's
// and the shared object's connections both start with. On error nothing
// is left.
func connect(cfg Config, options ...[2]string) (cluster C.rados_t, err error) {
	user := C.CString("client." + cfg.User)
	defer C.free(unsafe.Pointer(user))
	clusterName := C.CString("ceph")
	defer C.free(unsafe.Pointer(clusterName))
	if r := C.rados_create2(&cluster, clusterName, user, 0); r < 0 {
		return nil, fmt.Errorf("create a cluster handle for client.%s: %w", cfg.User, errno(r))
	}
	defer func() {
		if err != nil {
			C.rados_shutdown(cluster)
			cluster = nil
		}
	}()
	var path *C.char // NULL: librados's default places
	if cfg.Conf != "" {
		path = C.CString(cfg.Conf)
		defer C.free(unsafe.Pointer(path))
	}
	if r := C.rados_conf_read_file(cluster, path); r < 0 {
		conf := cfg.Conf
		if conf == "" {
			conf = "(default places)"
		}
		return cluster, fmt.Errorf("read conf %s: %w", conf, errno(r))
	}
	if cfg.Keyring != "" {
		options = append(options, [2]string{"keyring", cfg.Keyring})
	}
	for _, o := range options {
		if err := set(cluster, o[0], o[1]); err != nil {
			return cluster, err
		}
	}
	if r := C.rados_connect(cluster); r < 0 {
		return cluster, fmt.Errorf("connect as client.%s: %w", cfg.User, errno(r))
	}
	return cluster, nil
}

func set(cluster C.rados_t, option, value string) error {
	o, v := C.CString(option), C.CString(value)
	defer C.free(unsafe.Pointer(o))
	defer C.free(unsafe.Pointer(v))
	if r := C.rados_conf_set(cluster, o, v); r < 0 {
		return fmt.Errorf("set %s = %s: %w", option, value, errno(r))
	}
	return nil
}

// close closes the image, then the pool's context and the connection. It
// runs when no request is in flight (Image.Close holds the lock every
// request holds shared).
func (c *conn) close() error {
	var err error
	if c.img != nil {
		if r := C.rbd_close(c.img); r < 0 {
			err = errno(r)
		}
		c.img = nil
	}
	c.shutdown()
	c.mu.Lock()
	for _, q := range c.all {
		q.h.Delete()
	}
	c.all, c.free = nil, nil
	c.mu.Unlock()
	return err
}

// shutdown closes what open may have left: an image open is closed by the
// caller first.
func (c *conn) shutdown() {
	if c.img != nil {
		C.rbd_close(c.img)
		c.img = nil
	}
	if c.ioctx != nil {
		C.rados_ioctx_destroy(c.ioctx)
		c.ioctx = nil
	}
	if c.cluster != nil {
		C.rados_shutdown(c.cluster)
		c.cluster = nil
	}
}

// do submits one request and waits for its completion. The buffer is
// pinned from before the submission until the completion.
func (c *conn) do(o op, p []byte, off, n int64) error {
	q := c.get()
	defer c.put(q)
	var buf *C.char
	if len(p) > 0 {
		q.pin.Pin(&p[0])
		buf = (*C.char)(unsafe.Pointer(&p[0]))
	}
	defer q.pin.Unpin()
	if r := C.ddp_rbd_submit(c.img, C.int(o), C.uint64_t(off), C.uint64_t(n), buf, C.uintptr_t(q.h)); r < 0 {
		return errno(r)
	}
	ret := <-q.done
	switch {
	case ret < 0:
		return syscall.Errno(-ret)
	case o == opRead && ret != n:
		return fmt.Errorf("librbd read %d octets, not %d", ret, n)
	}
	return nil
}

// get returns a request not in flight.
func (c *conn) get() *request {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := len(c.free); k > 0 {
		q := c.free[k-1]
		c.free = c.free[:k-1]
		return q
	}
	q := &request{done: make(chan int64, 1)}
	q.h = cgo.NewHandle(q)
	c.all = append(c.all, q)
	return q
}

func (c *conn) put(q *request) {
	c.mu.Lock()
	c.free = append(c.free, q)
	c.mu.Unlock()
}
