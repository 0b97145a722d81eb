package target

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/bufpool"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/iserconn"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	log "github.com/sirupsen/logrus"
)

// extraTasks are task records beyond the queue depth, for immediate
// commands and for tasks whose response is sent but not yet completed.
const extraTasks = 32

// loginData is the data segment size of login and text PDUs both ways
// (RFC 7145 section 6.3: 8192 until negotiated otherwise).
const loginData = 8192

// errProtocol marks a PDU that breaks iSCSI or iSER badly enough that the
// connection is dropped.
var errProtocol = errors.New("target: protocol error")

// conn is one iSER connection of the target: its login, then its session
// in full feature phase. Everything runs on the connection's goroutine.
type conn struct {
	srv  *Server
	log  *log.Entry
	obs  Observer // nil: none
	info atomic.Pointer[SessionInfo]
	c    *iserconn.Conn
	wake chan bool // true: work for Idle; closed: stop
	once sync.Once

	// Slow commands run on goroutines of their own (runAsync) and queue
	// their task here when done; workers counts them, so nothing is freed
	// under one.
	asyncMu    sync.Mutex
	asyncDone  []int32
	asyncSpare []int32
	stopped    bool // wake is closed (under asyncMu)
	running    int  // slow commands started and not yet taken back (the connection's own count)
	workers    sync.WaitGroup

	lt                   *login.Target
	ffp                  bool
	res                  login.Result
	tgt                  *lu.Target // nil in a discovery session
	storeMR              map[*lu.LU]*mem.MR
	sendInv              bool // the initiator accepts Send with Invalidate
	closing              bool // the last PDU is queued: disconnect when sent
	closeWhy             error
	immediate            bool // ImmediateData=Yes
	solicitedOnly        bool // Write Base Offsets skip the unsolicited data (writeTO)
	firstBurst, maxBurst uint32

	statSN, expCmdSN uint32
	depth, busy      uint32

	tasks    []task
	free     []int32
	slotTask []int32 // send slot -> task waiting for its completion, or -1
	sendFree []int32
	sq       int     // free send queue entries
	waiting  []int32 // tasks blocked on staging, send slots or the send queue
	staging  *bufpool.Pool

	gen uint64 // generation of the server's exports this session follows

	lastRx   time.Time
	pingTTT  uint32
	pingSent time.Time // zero: no ping outstanding
}

func (c *conn) stop() {
	c.once.Do(func() {
		c.asyncMu.Lock()
		defer c.asyncMu.Unlock()
		if c.wake != nil {
			c.stopped = true
			close(c.wake)
		}
	})
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

// serve runs the connection from its MPA Request to its end.
func (c *conn) serve(req *iwarp.ConnRequest) {
	cfg := &c.srv.cfg
	if c.obs = cfg.Observer; c.obs != nil {
		c.obs.Connection(1)
		defer c.obs.Connection(-1)
	}
	hdr, err := iser.ParseCMHeader(req.PrivateData())
	if err != nil {
		c.log.Warnf("target: refusing a connection without iSER private data: %v", err)
		req.Reject(nil)
		return
	}
	c.sendInv = !hdr.SendInvNotSupported()
	c.log.Debugf("target: MPA revision %d, iSER CM flags: ZBVA not supported %v, Send with Invalidate not supported %v",
		req.Revision(), hdr.ZBVANotSupported(), hdr.SendInvNotSupported())
	depth := cfg.QueueDepth
	c.c, err = iserconn.New(c.srv.dev, iserconn.Config{
		RecvSlots: depth + extraTasks, RecvData: max(cfg.RecvDataSegment, loginData),
		SendSlots: depth + extraTasks, SendData: loginData,
		SendWRs: 3*depth + 2*extraTasks,
		Extra:   cfg.Staging, ExtraAccess: mem.LocalWrite | mem.RemoteWrite,
	})
	if err != nil {
		c.log.Errorf("target: connection resources: %v", err)
		req.Reject(nil)
		return
	}
	defer c.close()
	var reply [iser.CMHeaderLen]byte
	iser.CMFields{}.Encode(reply[:])
	c.asyncMu.Lock()
	c.wake = make(chan bool, 1)
	c.asyncMu.Unlock()
	if err := req.Accept(c.c.QP, reply[:]); err != nil {
		c.log.Warnf("target: MPA accept: %v", err)
		return
	}
	c.init()
	defer func() {
		if c.ffp && c.obs != nil {
			c.obs.Session(c.res.SessionType, -1)
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	err = c.c.Loop(context.Background(), c, c.wake, tick.C)
	switch {
	case errors.Is(err, iserconn.ErrStopped):
		c.log.Debug("target: connection stopped")
	case c.closing && c.closeWhy == nil:
		c.log.Debug("target: connection closed after logout")
	case c.closeWhy != nil:
		c.log.Warnf("target: connection dropped: %v", c.closeWhy)
	default:
		c.log.Infof("target: connection ended: %v", err)
	}
}

func (c *conn) init() {
	cfg := &c.srv.cfg
	n := cfg.QueueDepth + extraTasks
	c.tasks = make([]task, n)
	for i := n - 1; i >= 0; i-- {
		c.free = append(c.free, int32(i))
	}
	slots := c.c.SendSlots()
	c.slotTask = make([]int32, slots)
	for i := slots - 1; i >= 0; i-- {
		c.sendFree = append(c.sendFree, int32(i))
		c.slotTask[i] = -1
	}
	c.sq = 3*cfg.QueueDepth + 2*extraTasks
	c.staging, _ = bufpool.New(c.c.ExtraMR().Len(), 4096)
	c.depth = uint32(cfg.QueueDepth)
	c.lastRx = time.Now()
	offer := login.Defaults()
	offer.RDMAExtensions = true
	offer.InitialR2T = true
	offer.ImmediateData = true
	offer.FirstBurstLength = uint32(cfg.FirstBurst)
	offer.MaxBurstLength = uint32(cfg.MaxBurst)
	offer.TargetRecvDataSegmentLength = uint32(cfg.RecvDataSegment)
	offer.MaxOutstandingUnexpectedPDUs = extraTasks / 2
	c.lt = login.NewTarget(&login.TargetConfig{
		Lookup:     c.srv.lookup,
		Discovery:  cfg.Discovery,
		Offer:      offer,
		QueueDepth: uint32(cfg.QueueDepth),
		TPGT:       1,
		NewTSIH:    c.srv.nextTSIH,
	})
}

func (s *Server) lookup(name string) *login.TargetPolicy { return s.ex.Load().policies[name] }

func (s *Server) nextTSIH() uint16 {
	for {
		if v := uint16(s.tsih.Add(1)); v != 0 {
			return v
		}
	}
}

// close releases the connection's resources.
func (c *conn) close() {
	c.c.QP.Close()
	c.workers.Wait() // a slow command still running uses the LU
	for _, mr := range c.storeMR {
		c.srv.dev.Deregister(context.Background(), mr)
	}
	c.c.Close()
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

// PDU implements iserconn.Handler.
func (c *conn) PDU(msg []byte) error {
	c.lastRx = time.Now()
	op, err := iser.MessageOpcode(msg)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSER message: %v", errProtocol, err))
	}
	if op == iser.OpHello {
		return c.hello(msg)
	}
	h, pdu, err := iser.ParseHeader(msg)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSER header: %v", errProtocol, err))
	}
	bhs, err := iscsi.Parse(pdu)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSCSI PDU: %v", errProtocol, err))
	}
	if bhs.TotalAHSLength() != 0 || bhs.PDULen() != len(pdu) {
		if !c.ffp {
			return c.drop(fmt.Errorf("%w: PDU of %d octets announces %d (AHS %d words)", errProtocol, len(pdu), bhs.PDULen(), bhs.TotalAHSLength()))
		}
		return c.reject(bhs, iscsi.RejectProtocolError)
	}
	data := pdu[iscsi.BHSLen : iscsi.BHSLen+int(bhs.DataSegmentLength())]
	if !c.ffp {
		if bhs.Opcode() != iscsi.OpLoginReq {
			return c.drop(fmt.Errorf("%w: %v before login completed", errProtocol, bhs.Opcode()))
		}
		return c.login(pdu)
	}
	switch bhs.Opcode() {
	case iscsi.OpSCSICommand:
		return c.command(h, bhs, data)
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
		// iSER moves solicited data by RDMA Read and has no SNACK
		// (RFC 7145 section 7.3.5).
		return c.reject(bhs, iscsi.RejectProtocolError)
	}
	return c.reject(bhs, iscsi.RejectCommandNotSupported)
}

// hello answers an iSER Hello (RFC 7145 section 9.2) with a HelloReply
// accepting version 0xA. Linux never sends one; others may, before login.
func (c *conn) hello(msg []byte) error {
	hm, err := iser.ParseHello(msg)
	if err != nil || c.ffp {
		return c.drop(fmt.Errorf("%w: iSER Hello: %v", errProtocol, err))
	}
	slot, ok := c.takeSlot()
	if !ok {
		return c.drop(errors.New("target: no send buffer for a HelloReply"))
	}
	buf := c.c.SendBuf(slot)
	reject := hm.MinVer() > iser.Version || hm.MaxVer() < iser.Version
	n, err := iser.HelloReplyFields{Reject: reject, MaxVer: iser.Version, CurVer: iser.Version, ORD: hm.IRD()}.Encode(buf)
	if err != nil {
		return err
	}
	if reject {
		c.closing = true
		c.closeWhy = fmt.Errorf("iSER Hello for versions %d..%d", hm.MinVer(), hm.MaxVer())
	}
	return c.c.PostPDU(slot, n, 0)
}

// login runs one step of the login phase.
func (c *conn) login(pdu []byte) error {
	slot, ok := c.takeSlot()
	if !ok {
		return c.drop(errors.New("target: no send buffer for a Login Response"))
	}
	buf := c.c.SendBuf(slot)
	out, done, err := c.lt.Step(buf[iser.HeaderLen:iser.HeaderLen], pdu)
	if len(out) > 0 && &out[0] != &buf[iser.HeaderLen] {
		if len(out) > len(buf)-iser.HeaderLen {
			return c.drop(fmt.Errorf("target: Login Response of %d octets", len(out)))
		}
		copy(buf[iser.HeaderLen:], out)
	}
	iser.HeaderFields{}.Encode(buf)
	if perr := c.c.PostPDU(slot, iser.HeaderLen+len(out), 0); perr != nil {
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
	c.statSN, c.expCmdSN = c.res.StatSN, c.res.CmdSN
	p := c.res.Params
	c.immediate, c.firstBurst, c.maxBurst = p.ImmediateData, p.FirstBurstLength, p.MaxBurstLength
	c.solicitedOnly = p.TaggedBufferForSolicitedDataOnly || !p.TaggedBufferDeclared
	c.log = c.log.WithFields(log.Fields{"initiator": c.res.InitiatorName, "target": c.res.TargetName, "tsih": c.res.TSIH})
	if c.res.SessionType == "Normal" {
		ex := c.srv.ex.Load()
		c.gen = ex.gen
		c.storeMR = map[*lu.LU]*mem.MR{}
		if err := c.useTarget(ex.targets[c.res.TargetName]); err != nil {
			return c.drop(err)
		}
	}
	info := *c.info.Load()
	info.Initiator, info.Target, info.Kind, info.TSIH = c.res.InitiatorName, c.res.TargetName, c.res.SessionType, c.res.TSIH
	c.info.Store(&info)
	if c.obs != nil {
		c.obs.Session(c.res.SessionType, 1)
	}
	c.log.Infof("target: %s session logged in (TSIH %d)", c.res.SessionType, c.res.TSIH)
	return nil
}

// useTarget makes tg the session's target: its LUs' store mappings are
// registered (local access only) in the connection's PD, those of LUs it
// no longer has are deregistered.
func (c *conn) useTarget(tg *lu.Target) error {
	if tg == nil {
		return fmt.Errorf("target: target %q is not exported", c.res.TargetName)
	}
	keep := map[*lu.LU]bool{}
	for _, n := range tg.LUNs() {
		l := tg.LU(n)
		keep[l] = true
		if c.storeMR[l] != nil {
			continue
		}
		mr, err := c.srv.dev.Register(c.c.PD, l.Store().Mapping(), 0, int(l.Size()), 0)
		if err != nil {
			return fmt.Errorf("target: registering LUN %d: %w", n, err)
		}
		c.storeMR[l] = mr
	}
	for l, mr := range c.storeMR {
		if !keep[l] {
			// Waits for RDMA Writes still reading it.
			c.srv.dev.Deregister(context.Background(), mr)
			delete(c.storeMR, l)
		}
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

// SendDone implements iserconn.Handler.
func (c *conn) SendDone(slot int, st iwarp.Status) {
	c.sq++
	c.sendFree = append(c.sendFree, int32(slot))
	if ti := c.slotTask[slot]; ti >= 0 {
		c.slotTask[slot] = -1
		c.release(ti)
	}
	if c.closing && len(c.sendFree) == len(c.slotTask) {
		c.c.QP.Disconnect()
	}
}

// Completed implements iserconn.Handler: RDMA Reads of write data and
// RDMA Writes of read data.
func (c *conn) Completed(id uint64, wc *iwarp.WC) {
	c.sq++
	if wc.Op != iwarp.WCRead {
		return
	}
	t := &c.tasks[id]
	t.reads--
	if wc.Status != iwarp.StatusSuccess {
		t.failed = true
	}
	if t.reads == 0 && t.nextRead == t.edtl {
		c.advance(int32(id))
	}
}

// Idle implements iserconn.Handler: it retries blocked tasks and runs the
// NOP-In keepalive.
func (c *conn) Idle() error {
	if c.closing {
		return nil
	}
	if c.srv.draining.Load() && len(c.free) == len(c.tasks) {
		// Shutting down and nothing in progress: close gracefully.
		c.closing = true
		if len(c.sendFree) == len(c.slotTask) {
			c.c.QP.Disconnect()
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
