package target

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/transport/bufpool"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	log "github.com/sirupsen/logrus"
)

// extraTasks are what a connection has beyond its queue depth: send slots
// and receive buffers for immediate commands, pings, Rejects and the
// responses of tasks whose sends have not completed yet, and task records
// for immediate commands (taskRecords).
const extraTasks = 32

// taskRecords is the number of task records of a connection whose window
// is depth commands. A windowed command gives its place in the window
// back when its response is posted, so that the response's MaxCmdSN
// already counts it free, but keeps its record until the send completes;
// so besides the window's depth, every send slot (depth + extraTasks in
// both transports) may hold a record, and extraTasks more are for
// immediate commands. With fewer, a burst of commands that the window
// admitted could find no record (it was refused with a Reject, out of
// resources, seen with libiscsi's asynchronous tests over iSER).
func taskRecords(depth int) int { return 2*depth + 2*extraTasks }

// loginData is the data segment size of login and text PDUs both ways
// (RFC 7145 section 6.3: 8192 until negotiated otherwise).
const loginData = 8192

// errProtocol marks a PDU that breaks iSCSI or iSER badly enough that the
// connection is dropped.
var errProtocol = errors.New("target: protocol error")

// conn is the session core of one connection of the target: its login,
// then its session in full feature phase, over a transport (transport.go).
// Everything runs on the connection's goroutine.
type conn struct {
	srv  *Server
	log  *log.Entry
	obs  Observer // nil: none
	info atomic.Pointer[SessionInfo]
	// I/O counts for SessionList, updated as commands are answered.
	ioCmds, ioRead, ioWritten, ioPlaced atomic.Uint64
	tr                                  transport
	wake                                chan bool // true: work for idle; closed: stop

	// Accounting of the connections that have not logged in (Server):
	// peerIP and loggingIn are the server's, under its lock.
	peerIP    string
	loggingIn bool
	accepted  time.Time
	// hangup, when the transport sets it (under asyncMu), ends a
	// connection whose loop may be blocked in a write; stop calls it.
	hangup func()

	// Slow commands run on goroutines of their own (runAsync) and queue
	// their task here when done; workers counts them, so nothing is freed
	// under one.
	asyncMu    sync.Mutex
	asyncDone  []int32
	asyncSpare []int32
	stopped    bool // stop was called: wake is closed once made (under asyncMu)
	running    int  // slow commands started and not yet taken back (the connection's own count)
	workers    sync.WaitGroup
	pool       workerPool // the goroutines that run them (runAsync)

	lt                   *login.Target
	ffp                  bool
	res                  login.Result
	tgt                  *lu.Target // nil in a discovery session
	nexus                lu.Nexus   // the session's I_T nexus (reservations)
	port                 string     // its initiator port (persistent reservations)
	closing              bool       // the last PDU is queued: disconnect when sent
	closeWhy             error
	immediate            bool // ImmediateData=Yes
	firstBurst, maxBurst uint32
	// recvData is the longest data segment the target declared it takes
	// (TargetRecvDataSegmentLength over iSER, MaxRecvDataSegmentLength
	// over TCP): the bound of immediate data.
	recvData int
	// peerRecvData is the initiator's MaxRecvDataSegmentLength: what a
	// NOP-In may echo of ping data (0 before the login ends).
	peerRecvData int

	statSN, expCmdSN uint32
	depth, busy      uint32

	tasks    []task
	free     []int32
	slotTask []int32 // send slot -> task waiting for its completion, or -1
	sendFree []int32
	waiting  []int32 // tasks blocked on staging, send slots or the send queue
	staging  *bufpool.Pool

	gen uint64 // generation of the server's exports this session follows

	lastRx   time.Time
	pingTTT  uint32
	pingSent time.Time // zero: no ping outstanding
}

func (c *conn) stop() {
	c.asyncMu.Lock()
	defer c.asyncMu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	if c.wake != nil {
		close(c.wake)
	}
	if c.hangup != nil {
		c.hangup()
	}
}

// wakeUp makes the loop call Idle soon; a wake already pending will do.
func (c *conn) wakeUp() {
	c.asyncMu.Lock()
	defer c.asyncMu.Unlock()
	if c.stopped {
		return
	}
	select {
	case c.wake <- true:
	default:
	}
}

// errStopped: the server stopped the connection (Close).
var errStopped = errors.New("target: connection stopped")

// start readies the core to run over tr and returns the channel that wakes
// its loop (true: call idle; closed: stop).
func (c *conn) start(tr transport) <-chan bool {
	c.tr = tr
	c.asyncMu.Lock()
	c.wake = make(chan bool, 1)
	if c.stopped { // stopped before it started
		close(c.wake)
	}
	c.asyncMu.Unlock()
	c.init()
	return c.wake
}

// ended logs why the connection's loop ended, err, and ends the session.
func (c *conn) ended(err error) {
	c.nexusLoss()
	if c.ffp && c.obs != nil {
		c.obs.Session(c.res.SessionType, -1)
	}
	switch {
	case errors.Is(err, errStopped):
		c.log.Debug("target: connection stopped")
	case c.closing && c.closeWhy == nil:
		c.log.Debug("target: connection closed after logout")
	case c.closeWhy != nil:
		c.log.Warnf("target: connection dropped: %v", c.closeWhy)
	default:
		c.log.Infof("target: connection ended: %v", err)
	}
}

// nexusLoss releases the reservations of the session's I_T nexus, which is
// gone (SAM-5): at a logout and when the connection ends. A second call
// finds nothing to release.
func (c *conn) nexusLoss() {
	if c.tgt != nil && c.nexus != 0 {
		c.tgt.ITNexusLoss(c.nexus)
	}
}

func (c *conn) init() {
	cfg := &c.srv.cfg
	n := taskRecords(cfg.QueueDepth)
	c.tasks = make([]task, n)
	for i := n - 1; i >= 0; i-- {
		c.free = append(c.free, int32(i))
	}
	slots := c.tr.sendSlots()
	c.slotTask = make([]int32, slots)
	for i := slots - 1; i >= 0; i-- {
		c.sendFree = append(c.sendFree, int32(i))
		c.slotTask[i] = -1
	}
	c.staging, _ = bufpool.New(len(c.tr.staging()), 4096)
	c.depth = uint32(cfg.QueueDepth)
	c.lastRx = time.Now()
	offer := login.Defaults()
	offer.InitialR2T = true
	offer.ImmediateData = true
	offer.FirstBurstLength = uint32(cfg.FirstBurst)
	offer.MaxBurstLength = uint32(cfg.MaxBurst)
	offer.TargetRecvDataSegmentLength = uint32(cfg.RecvDataSegment)
	offer.MaxOutstandingUnexpectedPDUs = extraTasks / 2
	tc := &login.TargetConfig{
		Discovery:  cfg.Discovery,
		Offer:      offer,
		QueueDepth: uint32(cfg.QueueDepth),
		TPGT:       1,
		NewTSIH:    c.srv.nextTSIH,
	}
	// The offer of a Normal session depends on the target it names:
	// the login finds the target's policy before it begins negotiating
	// from Offer (login.Target), so the target's ImmediateData is put
	// into this connection's own config as it is looked up.
	tc.Lookup = func(name string) *login.TargetPolicy {
		ex := c.srv.ex.Load()
		p := ex.policies[name]
		if p != nil {
			tc.Offer.ImmediateData = !ex.noImmediate[name]
		}
		return p
	}
	c.tr.loginConfig(tc)
	c.recvData = int(tc.Offer.TargetRecvDataSegmentLength)
	if tc.Traditional {
		c.recvData = int(tc.Offer.MaxRecvDataSegmentLength)
	}
	c.lt = login.NewTarget(tc)
}

func (s *Server) nextTSIH() uint16 {
	for {
		if v := uint16(s.tsih.Add(1)); v != 0 {
			return v
		}
	}
}

// drop ends the connection because of what the peer did.
func (c *conn) drop(err error) error {
	if c.closeWhy == nil {
		c.closeWhy = err
		if c.obs != nil {
			c.obs.Rejected(0)
		}
	}
	return err
}

// malformed answers a PDU whose framing is wrong: before full feature
// phase the connection is dropped, in it the PDU is rejected.
func (c *conn) malformed(bhs iscsi.BHS, err error) error {
	if !c.ffp {
		return c.drop(err)
	}
	return c.reject(bhs, iscsi.RejectProtocolError)
}

// received handles one PDU from the initiator, its BHS and data segment, as the
// transport delivers it.
func (c *conn) received(bhs iscsi.BHS, data []byte) error {
	c.lastRx = time.Now()
	if !c.ffp {
		if bhs.Opcode() != iscsi.OpLoginReq {
			return c.drop(fmt.Errorf("%w: %v before login completed", errProtocol, bhs.Opcode()))
		}
		return c.login(bhs, data)
	}
	switch bhs.Opcode() {
	case iscsi.OpSCSICommand:
		return c.command(bhs, data)
	case iscsi.OpNOPOut:
		return c.nopOut(bhs, data)
	case iscsi.OpTaskMgmtReq:
		return c.taskMgmt(bhs)
	case iscsi.OpTextReq:
		return c.text(bhs, data)
	case iscsi.OpLogoutReq:
		return c.logout(bhs)
	case iscsi.OpLoginReq:
		return c.reject(bhs, iscsi.RejectProtocolError)
	case iscsi.OpSCSIDataOut, iscsi.OpSNACKReq:
		// Over iSER solicited data moves by RDMA Read and there is no
		// SNACK (RFC 7145 section 7.3.5); over TCP the transport takes
		// the Data-Out PDUs that answer its R2Ts, and SNACK needs an
		// ErrorRecoveryLevel above 0.
		return c.reject(bhs, iscsi.RejectProtocolError)
	}
	return c.reject(bhs, iscsi.RejectCommandNotSupported)
}

// login runs one step of the login phase.
func (c *conn) login(bhs iscsi.BHS, data []byte) error {
	slot, ok := c.takeSlot()
	if !ok {
		return c.drop(errors.New("target: no send buffer for a Login Response"))
	}
	buf := c.tr.sendBuf(slot)
	out, done, err := c.lt.Step(buf[:0], wholePDU(bhs, data))
	if len(out) > 0 && &out[0] != &buf[0] {
		if len(out) > len(buf) {
			return c.drop(fmt.Errorf("target: Login Response of %d octets", len(out)))
		}
		copy(buf, out)
	}
	if perr := c.tr.postPDU(slot, len(out), -1); perr != nil {
		return perr
	}
	if err != nil {
		c.log.Warnf("target: login failed: %v", err)
		c.closing, c.closeWhy = true, err
		return nil
	}
	if !done {
		return nil
	}
	c.res = c.lt.Result()
	c.ffp = true
	c.srv.loggedIn(c)
	c.statSN, c.expCmdSN = c.res.StatSN, c.res.CmdSN
	p := c.res.Params
	c.immediate, c.firstBurst, c.maxBurst = p.ImmediateData, p.FirstBurstLength, p.MaxBurstLength
	c.tr.negotiated(p)
	c.peerRecvData = int(p.PeerMaxRecvDataSegmentLength)
	c.log = c.log.WithFields(log.Fields{"initiator": c.res.InitiatorName, "target": c.res.TargetName, "tsih": c.res.TSIH})
	if c.res.SessionType == "Normal" {
		ex := c.srv.ex.Load()
		c.gen = ex.gen
		c.nexus = lu.Nexus(c.srv.nexus.Add(1))
		c.port = lu.InitiatorPort(c.res.InitiatorName, c.res.ISID)
		if err := c.useTarget(ex.targets[c.res.TargetName]); err != nil {
			return c.drop(err)
		}
	}
	info := *c.info.Load()
	info.Initiator, info.Target, info.Kind, info.TSIH = c.res.InitiatorName, c.res.TargetName, c.res.SessionType, c.res.TSIH
	info.Params = SessionParams{QueueDepth: c.depth, MaxRecvDataSegmentLength: p.PeerMaxRecvDataSegmentLength,
		FirstBurstLength: p.FirstBurstLength, MaxBurstLength: p.MaxBurstLength,
		ImmediateData: p.ImmediateData, InitialR2T: p.InitialR2T, HeaderDigest: p.HeaderDigest, DataDigest: p.DataDigest}
	c.info.Store(&info)
	if c.obs != nil {
		c.obs.Session(c.res.SessionType, 1)
	}
	c.log.Infof("target: %s session logged in (TSIH %d)", c.res.SessionType, c.res.TSIH)
	return nil
}

// wholePDU is the PDU of bhs and data as one slice: in place when the
// transport delivered them contiguous, as iSER does, else a copy.
func wholePDU(bhs iscsi.BHS, data []byte) []byte {
	n := iscsi.BHSLen + len(data)
	if len(data) == 0 {
		return bhs[:iscsi.BHSLen]
	}
	if cap(bhs) >= n && &bhs[:n][iscsi.BHSLen] == &data[0] {
		return bhs[:n]
	}
	return append(append(make([]byte, 0, n), bhs[:iscsi.BHSLen]...), data...)
}

// useTarget makes tg the session's target, with the transport ready to
// send from its LUs' stores.
func (c *conn) useTarget(tg *lu.Target) error {
	if tg == nil {
		return fmt.Errorf("target: target %q is not exported", c.res.TargetName)
	}
	if err := c.tr.useLUs(tg); err != nil {
		return err
	}
	c.tgt = tg
	return nil
}

// follow adopts a reloaded export set: a new LUN map, or the end of the
// session when its target, its initiator's admission or its CHAP changed.
func (c *conn) follow(ex *exports) error {
	c.gen = ex.gen
	if c.res.SessionType != login.SessionNormal {
		return nil
	}
	old, pol := c.res.Policy, ex.policies[c.res.TargetName]
	switch {
	case pol == nil:
		return c.drop(fmt.Errorf("target: %s is no longer exported", c.res.TargetName))
	case !allowed(pol.Initiators, c.res.InitiatorName):
		return c.drop(fmt.Errorf("target: %s is no longer allowed to %s", c.res.InitiatorName, c.res.TargetName))
	case !sameCHAP(old.CHAP, pol.CHAP):
		return c.drop(fmt.Errorf("target: CHAP of %s changed: the session must authenticate again", c.res.TargetName))
	}
	if tg := ex.targets[c.res.TargetName]; tg != c.tgt {
		if err := c.useTarget(tg); err != nil {
			return c.drop(err)
		}
		c.log.Infof("target: session follows the reloaded LUN map %v", tg.LUNs())
	}
	return nil
}

func allowed(list []string, name string) bool {
	if len(list) == 0 {
		return true
	}
	for _, n := range list {
		if n == name {
			return true
		}
	}
	return false
}

func sameCHAP(a, b *login.CHAP) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sent is called by the transport when send buffer slot is free again.
func (c *conn) sent(slot int) {
	c.sendFree = append(c.sendFree, int32(slot))
	if ti := c.slotTask[slot]; ti >= 0 {
		c.slotTask[slot] = -1
		c.release(ti)
	}
	if c.closing && len(c.sendFree) == len(c.slotTask) {
		c.tr.disconnect()
	}
}

// fetched is called by the transport when a fetch of task ti's write data
// is in (ok) or has failed.
func (c *conn) fetched(ti int32, ok bool) {
	t := &c.tasks[ti]
	t.reads--
	if !ok {
		t.failed = true
	}
	if t.reads == 0 && t.nextRead == t.edtl {
		c.advance(ti)
	}
}

// idle is called by the transport's loop when it is woken or its ticker
// fires: it retries blocked tasks and runs the NOP-In keepalive.
func (c *conn) idle() error {
	if c.closing {
		return nil
	}
	if !c.ffp && time.Since(c.accepted) > c.srv.cfg.LoginTimeout {
		return c.drop(fmt.Errorf("target: no login within %v", c.srv.cfg.LoginTimeout))
	}
	if c.srv.draining.Load() && len(c.free) == len(c.tasks) {
		// Shutting down and nothing in progress: close gracefully.
		c.closing = true
		if len(c.sendFree) == len(c.slotTask) {
			c.tr.disconnect()
		}
		return nil
	}
	if err := c.finishAsync(); err != nil {
		return err
	}
	if ex := c.srv.ex.Load(); c.ffp && ex.gen != c.gen {
		if err := c.follow(ex); err != nil {
			return err
		}
	}
	for len(c.waiting) > 0 {
		n := len(c.waiting)
		w := c.waiting
		c.waiting = nil
		for i, ti := range w {
			if err := c.advance(ti); err != nil {
				return err
			}
			if len(c.waiting) > 0 && i+1 < n {
				// Still blocked: keep order, stop trying.
				c.waiting = append(c.waiting, w[i+1:]...)
				break
			}
		}
		if len(c.waiting) > 0 {
			break
		}
	}
	return c.keepalive()
}
