package ublk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/uring"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ControlPath is ublk's control device.
const ControlPath = "/dev/ublk-control"

// Options are how Attach sets a device up.
type Options struct {
	// QueueDepth is the requests the kernel may have in flight, the
	// session's queue depth: 1..4096, default 64. They are spread over
	// the queues.
	QueueDepth int
	// Queues is the number of hardware queues, each served by a thread
	// of its own; default one per CPU, at most QueueDepth.
	Queues int
	// MaxIO is the largest request in octets (max_sectors), the size of
	// each tag's buffer; default 512 KiB.
	MaxIO int
	// Recovery adds the device with UBLK_F_USER_RECOVERY and
	// _REISSUE: when this process dies the kernel holds the device's
	// I/O until another serves it (Recover).
	Recovery bool
	// RecoverWait bounds how long Recover waits for the kernel to see
	// the old process gone; default 30 s.
	RecoverWait time.Duration
	Log         *log.Entry
}

// Device is a ublk block device, /dev/ublkbN, served by this process:
// each queue has a thread that issues FETCH_REQ and COMMIT_AND_FETCH_REQ
// on /dev/ublkcN through its own io_uring. Data is copied: the kernel copies
// a write's data into the tag's buffer before handing the request over
// and a read's data out of it after the commit; between that buffer and
// the session's registered slots this process copies once more.
type Device struct {
	ID   int
	Path string // /dev/ublkbN

	lun  *nbd.LUN
	opts Options
	log  *log.Entry

	cdev   int
	queues []*queue
	depth  int // tags per queue
	bufs   []byte

	done chan struct{}
	err  error
}

// control is /dev/ublk-control with a ring to send it commands.
type control struct {
	mu sync.Mutex
	fd int
	r  *uring.Ring
	// page is what a command's buffer is copied through: memory outside
	// the Go heap and stacks, whose address the kernel may keep using
	// while the command runs.
	page []byte
}

func openControl() (*control, error) {
	fd, err := unix.Open(ControlPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: ControlPath, Err: err}
	}
	r, err := uring.New(4, uring.SetupSQE128)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		r.Close()
		unix.Close(fd)
		return nil, err
	}
	return &control{fd: fd, r: r, page: page}, nil
}

func (c *control) close() {
	c.r.Close()
	unix.Close(c.fd)
	unix.Munmap(c.page)
}

// cmd sends one control command and waits for its result. buf is the
// command's buffer, in and out (its address and length go in the
// command).
func (c *control) cmd(op uint32, cc CtrlCmd, buf []byte) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return retryCanceled(canceledTries, canceledPause, func() (int32, error) { return c.cmdOnce(op, cc, buf) })
}

// A control command that completes with ECANCELED never ran: ublk's
// control commands block, so io_uring hands them to an io-wq worker of
// the submitting thread, and it completes a work item with ECANCELED when
// it cancels it before a worker picks it up (no worker could be started,
// or the worker pool is being torn down). START_DEV came back so once in
// CI; sending the command again is what makes it run.
const (
	canceledTries = 5
	canceledPause = 20 * time.Millisecond
)

// retryCanceled calls send until it returns anything but ECANCELED, at
// most tries times, pausing between tries.
func retryCanceled(tries int, pause time.Duration, send func() (int32, error)) (int32, error) {
	for i := 1; ; i++ {
		res, err := send()
		if !errors.Is(err, unix.ECANCELED) {
			return res, err
		}
		if i == tries {
			return res, fmt.Errorf("%w (cancelled by io_uring before it ran, %d times)", err, tries)
		}
		time.Sleep(pause)
	}
}

// cmdOnce submits the command once. c.mu is held.
func (c *control) cmdOnce(op uint32, cc CtrlCmd, buf []byte) (int32, error) {
	if len(buf) > 0 {
		copy(c.page, buf)
		defer copy(buf, c.page)
		cc.Addr = uint64(uintptr(unsafe.Pointer(&c.page[0])))
		cc.Len = uint16(len(buf))
	}
	var b [CtrlCmdLen]byte
	e, err := c.r.SQE()
	if err != nil {
		return 0, err
	}
	uring.PutCmd(e, c.fd, op, uint64(op), cc.Encode(b[:]))
	if err := c.r.Enter(1); err != nil {
		return 0, err
	}
	var res int32
	for c.r.Reap(func(_ uint64, r int32) { res = r }) == 0 {
		if err := c.r.Enter(1); err != nil {
			return 0, err
		}
	}
	if res < 0 {
		return res, unix.Errno(-res)
	}
	return res, nil
}

func cmdName(op uint32) string {
	switch op {
	case CmdAddDev:
		return "ADD_DEV"
	case CmdDelDev:
		return "DEL_DEV"
	case CmdStartDev:
		return "START_DEV"
	case CmdStopDev:
		return "STOP_DEV"
	case CmdSetParams:
		return "SET_PARAMS"
	case CmdGetDevInfo:
		return "GET_DEV_INFO"
	case CmdGetParams:
		return "GET_PARAMS"
	case CmdStartUserRecovery:
		return "START_USER_RECOVERY"
	case CmdEndUserRecovery:
		return "END_USER_RECOVERY"
	}
	return fmt.Sprintf("command %#x", op)
}

// Available says whether the kernel has ublk (ublk_drv loaded).
func Available() error {
	if _, err := os.Stat(ControlPath); err != nil {
		return err
	}
	c, err := openControl()
	if err != nil {
		return err
	}
	c.close()
	return nil
}

// Stop stops device id, whoever serves it (STOP_DEV): the block device
// goes away, its queues are aborted, and the serving process deletes it.
func Stop(id int) error {
	c, err := openControl()
	if err != nil {
		return err
	}
	defer c.close()
	if _, err := c.cmd(CmdStopDev, CtrlCmd{DevID: uint32(id), QueueID: 0xffff}, nil); err != nil {
		return fmt.Errorf("ublk: STOP_DEV of ublkb%d: %w", id, err)
	}
	return nil
}

// Remove stops and deletes device id when no process serves it any more
// (its server died and nobody recovered it): I/O the kernel held for a
// recovery fails.
func Remove(id int) error {
	c, err := openControl()
	if err != nil {
		return err
	}
	defer c.close()
	dev := CtrlCmd{DevID: uint32(id), QueueID: 0xffff}
	if _, err := c.cmd(CmdStopDev, dev, nil); err != nil {
		return fmt.Errorf("ublk: STOP_DEV of ublkb%d: %w", id, err)
	}
	if _, err := c.cmd(CmdDelDev, dev, nil); err != nil {
		return fmt.Errorf("ublk: DEL_DEV of ublkb%d: %w", id, err)
	}
	return nil
}

func shift(n int) uint8 {
	s := uint8(0)
	for 1<<s < n {
		s++
	}
	return s
}

// normalize fills in Options' defaults.
func (o *Options) normalize() {
	if o.QueueDepth <= 0 {
		o.QueueDepth = 64
	}
	o.QueueDepth = min(o.QueueDepth, MaxQueueDepth)
	if o.Queues <= 0 {
		o.Queues = runtime.NumCPU()
	}
	o.Queues = max(1, min(o.Queues, o.QueueDepth))
	if o.MaxIO <= 0 {
		o.MaxIO = 512 << 10
	}
	page := os.Getpagesize()
	o.MaxIO = (o.MaxIO + page - 1) / page * page
	if o.Log == nil {
		o.Log = log.NewEntry(log.StandardLogger())
	}
	if o.RecoverWait <= 0 {
		o.RecoverWait = 30 * time.Second
	}
}

// deviceParams are the device's parameters for lun.
func deviceParams(lun *nbd.LUN, maxIO int) Params {
	bs := lun.BlockSize()
	p := Params{
		Types:          ParamTypeBasic | ParamTypeDiscard,
		Attrs:          AttrVolatileCache | AttrFUA,
		LogicalBSShift: shift(bs), PhysicalBSShift: shift(bs), IOMinShift: shift(bs),
		MaxSectors: uint32(maxIO >> 9),
		DevSectors: uint64(lun.Size() >> 9),
		// Discard and write zeroes: one range per request, as 6.1
		// requires, of up to 1 GiB; the LUN splits them into commands.
		DiscardGranularity: uint32(bs), MaxDiscardSectors: 1 << 21, MaxWriteZeroesSectors: 1 << 21, MaxDiscardSegments: 1,
	}
	if lun.ReadOnly() {
		p.Attrs |= AttrReadOnly
	}
	return p
}

func checkBlockSize(lun *nbd.LUN) error {
	if bs, page := lun.BlockSize(), os.Getpagesize(); bs < 512 || bs > page {
		return fmt.Errorf("ublk: a %d-octet logical block is outside 512..%d", bs, page)
	}
	return nil
}

// Attach adds a ublk device for lun and serves it until it is stopped
// (Disconnect here, or Stop from any process).
func Attach(ctx context.Context, lun *nbd.LUN, o Options) (*Device, error) {
	o.normalize()
	if err := checkBlockSize(lun); err != nil {
		return nil, err
	}
	c, err := openControl()
	if err != nil {
		return nil, err
	}
	depth := (o.QueueDepth + o.Queues - 1) / o.Queues
	var flags uint64
	if o.Recovery {
		flags = FlagUserRecovery | FlagUserRecoveryReissue
	}
	info := make([]byte, DevInfoLen)
	DevInfo{NrHWQueues: uint16(o.Queues), QueueDepth: uint16(depth), MaxIOBufBytes: uint32(o.MaxIO), DevID: ^uint32(0), Flags: flags}.Encode(info)
	if _, err := c.cmd(CmdAddDev, CtrlCmd{DevID: ^uint32(0), QueueID: 0xffff}, info); err != nil {
		c.close()
		return nil, fmt.Errorf("ublk: ADD_DEV: %w", err)
	}
	di, _ := ParseDevInfo(info)
	if o.Recovery && di.Flags&FlagUserRecovery == 0 {
		o.Log.Warnf("ublk: the kernel does not offer user recovery: a restart of this process fails the device's I/O")
	}
	o.Queues = int(di.NrHWQueues) // the kernel allows one per CPU
	d := newDevice(int(di.DevID), lun, o, int(di.QueueDepth))
	p := deviceParams(lun, o.MaxIO).Encode(make([]byte, ParamsLen))
	if _, err = c.cmd(CmdSetParams, CtrlCmd{DevID: di.DevID, QueueID: 0xffff}, p); err != nil {
		err = fmt.Errorf("ublk: SET_PARAMS: %w", err)
	} else {
		// START_DEV waits for every tag's FETCH_REQ, then adds the
		// disk, whose partition scan the queues already serve.
		err = d.start(ctx, c, CmdStartDev)
	}
	if err != nil {
		if _, derr := c.cmd(CmdDelDev, CtrlCmd{DevID: di.DevID, QueueID: 0xffff}, nil); derr != nil {
			o.Log.Warnf("ublk: DEL_DEV of ublkb%d after a failed start: %v", di.DevID, derr)
		}
		c.close()
		return nil, err
	}
	go d.serve(c)
	return d, nil
}

// Recover serves device id again after the process that served it died
// (UBLK_F_USER_RECOVERY): the kernel holds the device's I/O meanwhile,
// and requeues what the dead process had not answered. It waits up to
// RecoverWait for the kernel to notice the death (it looks every 5 s),
// checks that lun is the device's size and block size, and takes the
// queues over (START_USER_RECOVERY, FETCH_REQ, END_USER_RECOVERY).
func Recover(ctx context.Context, id int, lun *nbd.LUN, o Options) (*Device, error) {
	o.normalize()
	c, err := openControl()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Device, error) {
		c.close()
		return nil, err
	}
	dev := CtrlCmd{DevID: uint32(id), QueueID: 0xffff}
	info := make([]byte, DevInfoLen)
	if _, err := c.cmd(CmdGetDevInfo, dev, info); err != nil {
		return fail(fmt.Errorf("ublk: GET_DEV_INFO of ublkb%d: %w", id, err))
	}
	di, _ := ParseDevInfo(info)
	if di.Flags&FlagUserRecovery == 0 {
		return fail(fmt.Errorf("ublk: ublkb%d was added without user recovery", id))
	}
	pb := Params{}.Encode(make([]byte, ParamsLen)) // its length field says how much to read
	if _, err := c.cmd(CmdGetParams, dev, pb); err != nil {
		return fail(fmt.Errorf("ublk: GET_PARAMS of ublkb%d: %w", id, err))
	}
	p, _ := ParseParams(pb)
	if p.DevSectors != uint64(lun.Size()>>9) || p.LogicalBSShift != shift(lun.BlockSize()) {
		return fail(fmt.Errorf("ublk: ublkb%d has %d sectors of 1<<%d octets, the LUN %d octets in blocks of %d: not the same disk",
			id, p.DevSectors, p.LogicalBSShift, lun.Size(), lun.BlockSize()))
	}
	o.Queues, o.MaxIO = int(di.NrHWQueues), int(di.MaxIOBufBytes)
	deadline := time.Now().Add(o.RecoverWait)
	for {
		_, err := c.cmd(CmdStartUserRecovery, dev, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fail(fmt.Errorf("ublk: START_USER_RECOVERY of ublkb%d: %w (busy: its process still runs, or the kernel has not yet seen it die)", id, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := newDevice(id, lun, o, int(di.QueueDepth))
	if err := d.start(ctx, c, CmdEndUserRecovery); err != nil {
		return fail(err)
	}
	go d.serve(c)
	return d, nil
}

func newDevice(id int, lun *nbd.LUN, o Options, depth int) *Device {
	return &Device{ID: id, Path: fmt.Sprintf("/dev/ublkb%d", id), lun: lun, opts: o, log: o.Log,
		cdev: -1, depth: depth, done: make(chan struct{})}
}

// start opens /dev/ublkcN, maps each queue's descriptors, starts the
// queues' threads, and once each has fetched sends op (START_DEV or
// END_USER_RECOVERY), which the kernel completes when every tag is
// fetched. On failure nothing of the device is left open.
func (d *Device) start(ctx context.Context, c *control, op uint32) error {
	o := d.opts
	page := os.Getpagesize()
	cpath := fmt.Sprintf("/dev/ublkc%d", d.ID)
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d.cdev, err = unix.Open(cpath, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil || !errors.Is(err, unix.ENOENT) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: cpath, Err: err}
	}
	descSize := (d.depth*descLen + page - 1) / page * page
	if d.bufs, err = unix.Mmap(-1, 0, o.Queues*d.depth*o.MaxIO, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		d.release()
		return fmt.Errorf("ublk: I/O buffers: %w", err)
	}
	for i := range o.Queues {
		q := &queue{d: d, id: uint16(i), lun: d.lun, ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
		// Queue i's descriptors are at i times the room of the
		// largest queue's.
		if q.descs, err = unix.Mmap(d.cdev, int64(i)*cmdBufStride, descSize, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			d.release()
			return fmt.Errorf("ublk: mmap of %s's queue %d descriptors: %w", cpath, i, err)
		}
		d.queues = append(d.queues, q)
	}
	started := make(chan error, o.Queues)
	for _, q := range d.queues {
		go func() {
			defer close(q.done)
			q.run(started)
		}()
	}
	stopped := func(err error) error {
		// The queues that did fetch hold the device until it is
		// stopped.
		c.cmd(CmdStopDev, CtrlCmd{DevID: uint32(d.ID), QueueID: 0xffff}, nil)
		d.waitQueues()
		d.release()
		return err
	}
	for range d.queues {
		if err := <-started; err != nil {
			return stopped(err)
		}
	}
	if _, err := c.cmd(op, CtrlCmd{DevID: uint32(d.ID), QueueID: 0xffff, Data: [2]uint64{uint64(os.Getpid())}}, nil); err != nil {
		return stopped(fmt.Errorf("ublk: %s: %w", cmdName(op), err))
	}
	d.log.Infof("%s: %d queues of %d tags, requests of up to %d KiB copied through per-tag buffers (%s)", d.Path, o.Queues, d.depth, o.MaxIO>>10, cmdName(op))
	return nil
}

func (d *Device) waitQueues() {
	for _, q := range d.queues {
		<-q.done
	}
}

// serve waits for the queues to end (the device stopped), then deletes
// the device.
func (d *Device) serve(c *control) {
	d.waitQueues()
	for _, q := range d.queues {
		if q.err != nil && d.err == nil {
			d.err = q.err
		}
	}
	d.release()
	if _, err := c.cmd(CmdDelDev, CtrlCmd{DevID: uint32(d.ID), QueueID: 0xffff}, nil); err != nil && d.err == nil {
		d.err = fmt.Errorf("ublk: DEL_DEV: %w", err)
	}
	c.close()
	close(d.done)
}

// release gives back what refers to /dev/ublkcN, so that DEL_DEV, which
// waits for its last user, can finish.
func (d *Device) release() {
	for _, q := range d.queues {
		if q.descs != nil {
			unix.Munmap(q.descs)
			q.descs = nil
		}
	}
	if d.cdev >= 0 {
		unix.Close(d.cdev)
		d.cdev = -1
	}
	if d.bufs != nil {
		unix.Munmap(d.bufs)
		d.bufs = nil
	}
}

// Done is closed once the device is deleted.
func (d *Device) Done() <-chan struct{} { return d.done }

// Err is why serving ended: nil for a stop.
func (d *Device) Err() error {
	<-d.done
	return d.err
}

// Disconnect stops the device (STOP_DEV) and waits until it is deleted.
func (d *Device) Disconnect(timeout time.Duration) error {
	if err := Stop(d.ID); err != nil {
		select {
		case <-d.done:
			return d.err
		default:
		}
		return err
	}
	select {
	case <-d.done:
		return d.err
	case <-time.After(timeout):
		return fmt.Errorf("%s: not deleted %v after STOP_DEV", d.Path, timeout)
	}
}
