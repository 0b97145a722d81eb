package transport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	"golang.org/x/sys/unix"
)

// FuzzTargetSession is a stateful network fuzzer of the target. For each
// input it logs in over one of the target's two portals (iSER over MPA
// from a hand-driven MPA endpoint, or iSCSI over TCP), then sends the
// stream of PDUs the input decodes to (fuzzOp): SCSI commands built from
// valid templates whose fields the input's bytes choose or mutate, Data-Out
// PDUs, NOP-Out, Text, task management, Logout, raw byte flips of any of
// them, and, on purpose, broken framing (bad MPA CRCs and lengths, bad DDP
// headers, bad digests, garbage). The peer answers the target's RDMA Read
// Requests and R2Ts with the write data it promised, unless told to spoil
// the next answer.
//
// After each input it checks that
//   - the target survives (a panic anywhere fails the process) and ends
//     the connection once the peer has closed it;
//   - no LU octet changed that the stream did not ask to write: a changed
//     octet must lie in the range of a writing CDB the stream sent to that
//     LU and hold the octet the peer supplied for that position of that
//     command (its immediate data, its Data-Out, or the octets of the
//     peer's buffer its iSER header named), or zero for a WRITE SAME that
//     may unmap;
//   - the target's other target, served alongside to a well-behaved iSER
//     session and a well-behaved iSCSI/TCP session, keeps doing verified
//     I/O, and its LU holds exactly what they wrote.
//
// What "asked to write" means for a WRITE that arrived in part: the data
// of every command comes from a per-command sequence D(seed, offset), so
// octets placed from another command's data, from a spoiled (bad CRC or
// digest) answer, or from stale staging are caught; a WRITE whose
// data-out was shorter than its CDB may write the whole blocks it sent
// (transport/lu, the residual case), and those hold D.
func FuzzTargetSession(f *testing.F) {
	fr := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, data []byte) { fr.run(t, data) })
}

// The fuzz target's LUs: two on the fuzzed target, one on the target the
// well-behaved sessions use.
const (
	fuzzLUSize   = 1 << 20
	fuzzLU1Size  = 256 << 10
	fuzzGoodSize = 1 << 20
	fuzzTarget   = "iqn.2026-11.io.ddpstore:fuzz"
	fuzzGood     = "iqn.2026-11.io.ddpstore:good"
	fuzzIniName  = "iqn.2026-11.io.ddpstore:fuzzer"
	goodIniName  = "iqn.2026-11.io.ddpstore:wellbehaved"
	// The peer's pretend registered buffer over iSER.
	fuzzRegion  = 1 << 20
	fuzzRegSTag = 0x00c0de00 | 0x5a
	fuzzRegBase = 0x7f0000010000
	// Target limits small enough for the fuzzer to reach.
	fuzzQueueDepth = 8
	fuzzStaging    = 1 << 20
	fuzzFirstBurst = 16 << 10
	fuzzMaxBurst   = 64 << 10
)

// fuzzRig is the target the fuzzer talks to, kept across inputs.
type fuzzRig struct {
	dev               *iwarp.Device
	srv               *target.Server
	iserAddr, tcpAddr string
	lus               [2]*lu.LU // the fuzzed target's LUN 0 and 1
	good              *lu.LU
	shadow            [2][]byte // what lus held after the last input
	goodShadow        []byte
	goodISER, goodTCP *initiator.Session
	sessions          int // connections of the well-behaved sessions
	n                 atomic.Uint64
	prev              [3]*fuzzSession // the inputs before, for the messages
	past              []*fuzzSession  // the last inputs that wrote, for the messages
	initial           []byte          // LUN 0 as it was filled
	isid              atomic.Uint64
}

func newFuzzRig(f testing.TB) *fuzzRig {
	r := &fuzzRig{dev: iwarp.NewDevice(0)}
	mk := func(id uint64, size int64) *lu.LU {
		st, err := blockdev.NewMemory(size)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { st.Close() })
		l, err := lu.New(id, st)
		if err != nil {
			f.Fatal(err)
		}
		return l
	}
	r.lus[0], r.lus[1], r.good = mk(1, fuzzLUSize), mk(2, fuzzLU1Size), mk(3, fuzzGoodSize)
	fill := rand.New(rand.NewSource(7))
	for _, l := range []*lu.LU{r.lus[0], r.lus[1], r.good} {
		fill.Read(l.Store().Mapping().Bytes())
	}
	r.initial = append([]byte(nil), r.lus[0].Store().Mapping().Bytes()...)
	tg, err := lu.NewTarget(fuzzTarget, map[uint16]*lu.LU{0: r.lus[0], 1: r.lus[1]})
	if err != nil {
		f.Fatal(err)
	}
	gt, err := lu.NewTarget(fuzzGood, map[uint16]*lu.LU{0: r.good})
	if err != nil {
		f.Fatal(err)
	}
	il, err := r.dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		f.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	r.iserAddr, r.tcpAddr = il.Addr().String(), tl.Addr().String()
	cfg := target.Config{
		Exports: []target.Export{{Target: tg, Initiators: []string{fuzzIniName}},
			{Target: gt, Initiators: []string{goodIniName}}},
		Portals:    []login.Portal{{Addr: r.iserAddr, TPGT: 1}},
		QueueDepth: fuzzQueueDepth, Staging: fuzzStaging, FirstBurst: fuzzFirstBurst, MaxBurst: fuzzMaxBurst,
		LoginTimeout: 5 * time.Second, MaxLoggingInPerPeer: 8,
		Log: quietLog(),
	}
	if r.srv, err = target.NewServer(r.dev, cfg); err != nil {
		f.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- r.srv.Serve(il) }()
	go func() { done <- r.srv.ServeTCP(tl) }()
	f.Cleanup(func() {
		r.srv.Close()
		for i := 0; i < 2; i++ {
			if err := <-done; err != nil {
				f.Errorf("Serve: %v", err)
			}
		}
		r.dev.Close()
	})
	dial := func(network, addr string) *initiator.Session {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := initiator.Dial(ctx, r.dev, network, addr, initiator.Config{TargetName: fuzzGood,
			InitiatorName: goodIniName, Log: quietLog(), Buffers: 1 << 20})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { s.Close() })
		return s
	}
	r.goodISER = dial("tcp", r.iserAddr)
	r.goodTCP = dial(initiator.NetworkISCSITCP, r.tcpAddr)
	r.sessions = r.srv.Sessions()
	for i, l := range r.lus {
		r.shadow[i] = append([]byte(nil), l.Store().Mapping().Bytes()...)
	}
	r.goodShadow = append([]byte(nil), r.good.Store().Mapping().Bytes()...)
	return r
}

// run plays one input and checks what it did.
func (r *fuzzRig) run(t *testing.T, data []byte) (changed int) {
	n := r.n.Add(1)
	// Only a fuzz session may write the fuzzed LUs: between inputs they are
	// read-only, so a write made after the session ended (or by the
	// well-behaved sessions) faults where it is made (a panic with its
	// stack, or EFAULT from a system call) instead of being seen later.
	r.protect(t, unix.PROT_READ|unix.PROT_WRITE)
	s := &fuzzSession{t: t, r: r, in: data, input: append([]byte(nil), data...), seedBase: uint32(n) * 0x10001}
	if len(data) > 0 {
		s.flags = data[0]
		s.in = data[1:]
	}
	var err error
	if s.flags&fzTCP != 0 {
		err = s.startTCP()
	} else {
		err = s.startISER()
	}
	if err != nil {
		t.Fatalf("a valid login failed: %v", err)
	}
	for i := 0; i < 64 && len(s.in) > 0 && !s.dead.Load(); i++ {
		s.op()
	}
	s.lost = s.dead.Load()
	s.finish()
	// Every connection of the input must end once the peer has closed:
	// the target serves only the well-behaved sessions, logged in (a count
	// alone would be fooled by one of them reconnecting).
	deadline := time.Now().Add(15 * time.Second)
	for !r.onlyGood() {
		if time.Now().After(deadline) {
			t.Fatalf("the target still serves other connections than the well-behaved ones 15 s after the fuzz peer closed: %+v",
				r.srv.SessionList())
		}
		time.Sleep(time.Millisecond)
	}
	s.wg.Wait()
	r.protect(t, unix.PROT_READ)
	changed = r.check(t, s)
	if testing.Verbose() {
		t.Logf("%d writes sent, %d LU octets changed, %d PDUs received, connection lost early: %v",
			len(s.writes), changed, s.received.Load(), s.lost)
	}
	r.checkGood(t, n)
	return changed
}

func (r *fuzzRig) protect(t *testing.T, prot int) {
	for _, l := range r.lus {
		if err := unix.Mprotect(l.Store().Mapping().Bytes(), prot); err != nil {
			t.Fatal(err)
		}
	}
}

// onlyGood reports whether the target serves exactly the well-behaved
// sessions, logged in.
func (r *fuzzRig) onlyGood() bool {
	l := r.srv.SessionList()
	if len(l) != r.sessions {
		return false
	}
	for _, si := range l {
		if si.Initiator != goodIniName {
			return false
		}
	}
	return true
}

// check compares the fuzzed LUs with the shadow: every changed octet must
// be one the input asked to write (the comment of FuzzTargetSession).
func (r *fuzzRig) check(t *testing.T, s *fuzzSession) (changed int) {
	// The shadow follows the LUs even when the check fails: the fuzzer
	// goes on (minimizing) in this process, and a stale shadow would fail
	// every input after, each for the octets of the one that failed.
	defer func() {
		for i, l := range r.lus {
			copy(r.shadow[i], l.Store().Mapping().Bytes())
		}
	}()
	for i, l := range r.lus {
		now, was := l.Store().Mapping().Bytes(), r.shadow[i]
		for x := 0; x < len(now); x++ {
			if now[x] == was[x] {
				continue
			}
			changed++
			// Find the run of changed octets for the message.
			if !s.allowed(i, int64(x), now[x]) {
				end := x
				for end < len(now) && now[end] != was[end] {
					end++
				}
				late := ""
				for k := len(r.past) - 1; k >= 0 && late == ""; k-- {
					if p := r.past[k]; p.allowed(i, int64(x), now[x]) {
						late = fmt.Sprintf(" (it is what the input %d before this one asked to write there: %q: %s)", len(r.past)-k, p.input, p.writesString(i))
					}
				}
				for k, p := range r.prev {
					if p != nil {
						t.Logf("input %d before: %q", k+1, p.input)
					}
				}
				// Where else these octets are: a clue to the writer.
				probe := now[x:min(end, x+32)]
				for name, b := range map[string][]byte{"the well-behaved LU": r.goodShadow, "LUN 0's shadow": was,
					"LUN 1": r.lus[1].Store().Mapping().Bytes(), "the peer's region": s.region, "LUN 0 as first filled": r.initial} {
					if at := bytes.Index(b, probe); at >= 0 {
						t.Logf("the changed octets are at offset %d of %s", at, name)
					}
				}
				t.Fatalf("LUN %d octet %d (block %d) changed from %#02x to %#02x, which the stream did not ask for (changed run [%d,%d): % x); writes sent: %s%s",
					i, x, x/512, was[x], now[x], x, end, now[x:min(end, x+64)], s.writesString(i), late)
			}
		}
		copy(was, now)
	}
	copy(r.prev[1:], r.prev[:])
	r.prev[0] = s
	if len(s.writes) > 0 {
		// What diagnosis needs of it, bounded: a late write is looked up.
		r.past = append(r.past, &fuzzSession{input: s.input, writes: s.writes, region: s.region})
		if len(r.past) > 128 {
			r.past = r.past[1:]
		}
	}
	return changed
}

// checkGood runs verified I/O on the well-behaved sessions and checks
// their LU.
func (r *fuzzRig) checkGood(t *testing.T, n uint64) {
	for i, s := range []*initiator.Session{r.goodISER, r.goodTCP} {
		lba := uint64(i)*1024 + (n*8)%1016
		buf, err := s.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(int64(n)*2 + int64(i)))
		rng.Read(buf)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		wc := &initiator.Command{CDB: write16(lba, 8), Dir: initiator.DataOut, Data: buf}
		if err := s.Do(ctx, wc); err != nil || wc.Status != 0 {
			cancel()
			t.Fatalf("the well-behaved session %d: write: %v status %#x", i, err, wc.Status)
		}
		copy(r.goodShadow[lba*512:], buf)
		clear(buf)
		rc := &initiator.Command{CDB: read16(lba, 8), Dir: initiator.DataIn, Data: buf}
		if err := s.Do(ctx, rc); err != nil || rc.Status != 0 {
			cancel()
			t.Fatalf("the well-behaved session %d: read: %v status %#x", i, err, rc.Status)
		}
		cancel()
		if !bytes.Equal(buf, r.goodShadow[lba*512:lba*512+4096]) {
			t.Fatalf("the well-behaved session %d read back other data than it wrote at LBA %d", i, lba)
		}
		s.Free(buf)
	}
	if !bytes.Equal(r.good.Store().Mapping().Bytes(), r.goodShadow) {
		t.Fatal("the well-behaved sessions' LU holds octets they did not write")
	}
}

// Flags of an input's first octet.
const (
	fzTCP        = 1 << 0 // iSCSI/TCP instead of iSER
	fzHdrDigest  = 1 << 1 // TCP: HeaderDigest=CRC32C
	fzDataDigest = 1 << 2 // TCP: DataDigest=CRC32C
	fzNoImm      = 1 << 3 // offer ImmediateData=No
	fzNoAnswer   = 1 << 4 // do not answer RDMA Read Requests or R2Ts
)

// Spoilers of the next answer to an RDMA Read Request or R2T.
const (
	spoilNone = iota
	spoilCRC  // iSER: a payload octet flipped under a CRC made before; TCP: the data digest likewise (or a wrong DataSN)
	spoilHalf // only the first half of the data, then nothing
	spoilOff  // the data at the wrong offset (TO or BufferOffset)
	spoilSkip // no answer at all
	spoilKinds
)

// fuzzWrite is a writing command the stream sent: the LU octets it may
// change and what each may hold.
type fuzzWrite struct {
	lun        int
	start, end int64 // octets of the LU
	seed       uint32
	region     int64 // offset in the peer's region of the write base offset, -1: none
	imm        int64
	same       bool // WRITE SAME: one block repeated; zero allowed (UNMAP bit)
	cdb        []byte
	itt        uint32
}

// fuzzCmd is what the peer remembers of a command to answer for its data.
type fuzzCmd struct {
	seed uint32
}

// fuzzSession is one input's connection.
type fuzzSession struct {
	t        *testing.T
	r        *fuzzRig
	in       []byte
	input    []byte // all of it, for messages
	flags    byte
	seedBase uint32
	nc       net.Conn
	wmu      sync.Mutex // one writer of the stream at a time (the op loop, the answerer)
	dead     atomic.Bool
	rx       chan []byte // PDUs (BHS and data) from the target
	wg       sync.WaitGroup
	spoil    atomic.Int32
	received atomic.Int64 // PDUs from the target
	lost     bool         // the connection ended before the ops did

	cmdSN, itt uint32
	lastITTs   []uint32
	nCmds      uint32
	maxSeg     int // the target's MaxRecvDataSegmentLength
	immOK      bool
	firstBurst uint32

	mu   sync.Mutex
	cmds map[uint32]fuzzCmd // by ITT, for the answers
	// ittSeeds: every seed a command with the ITT had. The peer answers
	// an R2T (which names only the ITT) with the data of the last command
	// sent with it, so a command sharing its ITT may get another's data:
	// what the initiator sent it all the same.
	ittSeeds map[uint32][]uint32
	writes   []fuzzWrite
	region   []byte // iSER: the peer's buffer

	// iSER over MPA.
	fr      *mpa.Framer
	df      *mpa.Deframer
	msn     uint32
	lastR   atomic.Uint32 // the sink STag of the last Read Request (its staging, or a placed WRITE's window)
	lastRTO atomic.Uint64 // and its sink TO

	// TCP: the digests in force.
	hd, dd atomic.Bool
}

// b returns the input's next octet, 0 when it is used up.
func (s *fuzzSession) b() byte {
	if len(s.in) == 0 {
		return 0
	}
	v := s.in[0]
	s.in = s.in[1:]
	return v
}

func (s *fuzzSession) u16() uint16 { return uint16(s.b())<<8 | uint16(s.b()) }

// fuzzData is octet off of the write data of the command with seed.
func fuzzData(seed uint32, off int64) byte {
	h := seed*0x9e3779b1 ^ uint32(off)*0x85ebca77 ^ uint32(off>>32)
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	return byte(h)
}

func fillData(b []byte, seed uint32, off int64) {
	for i := range b {
		b[i] = fuzzData(seed, off+int64(i))
	}
}

// write sends octets on the stream; a failure ends the input's ops (the
// target dropped the connection, which is allowed).
func (s *fuzzSession) write(b ...[]byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dead.Load() {
		return
	}
	s.nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
	bufs := net.Buffers(append([][]byte(nil), b...))
	if _, err := bufs.WriteTo(s.nc); err != nil {
		s.dead.Store(true)
	}
}

// startISER runs the MPA startup and the iSER login.
func (s *fuzzSession) startISER() error {
	nc, err := net.DialTimeout("tcp", s.r.iserAddr, 5*time.Second)
	if err != nil {
		return err
	}
	s.nc = nc
	s.rx = make(chan []byte, 1024)
	s.region = make([]byte, fuzzRegion)
	var pd [iser.CMHeaderLen]byte
	iser.CMFields{SendInvNotSupported: true}.Encode(pd[:])
	cfg := mpa.StartupConfig{IRD: 64, ORD: 16}
	req := cfg.Request(pd[:])
	frame, err := req.Append(nil)
	if err != nil {
		return err
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		return err
	}
	buf := make([]byte, mpa.MaxStartupFrame)
	if _, err := io.ReadFull(nc, buf[:mpa.StartupHeaderLen]); err != nil {
		return fmt.Errorf("MPA Reply: %w", err)
	}
	n, err := mpa.ParseStartupHeader(buf, mpa.Reply, mpa.MaxPrivateData)
	if err != nil {
		return err
	}
	if _, err := io.ReadFull(nc, buf[mpa.StartupHeaderLen:mpa.StartupHeaderLen+n]); err != nil {
		return err
	}
	rep, err := mpa.ParseStartup(buf[:mpa.StartupHeaderLen+n], mpa.Reply, mpa.MaxPrivateData)
	if err != nil {
		return err
	}
	st := rep.Startup()
	if st.R {
		return errors.New("MPA Request rejected")
	}
	neg, err := mpa.Negotiate(mpa.Initiator, &cfg, &st)
	if err != nil {
		return err
	}
	nc.SetDeadline(time.Time{})
	s.fr = mpa.NewFramer(0, neg.TxMarkers, neg.CRC)
	s.df = mpa.NewDeframer(0, neg.RxMarkers, neg.CRC)
	s.msn = 1
	s.wg.Add(1)
	go s.readISER()
	return s.login(false)
}

// login runs a valid login with the iSCSI login state machine.
func (s *fuzzSession) login(traditional bool) error {
	offer := login.Defaults()
	offer.RDMAExtensions = !traditional
	offer.ImmediateData = s.flags&fzNoImm == 0
	offer.MaxRecvDataSegmentLength = 256 << 10
	if traditional {
		offer.HeaderDigest, offer.DataDigest = s.flags&fzHdrDigest != 0, s.flags&fzDataDigest != 0
	}
	li := login.NewInitiator(&login.InitiatorConfig{InitiatorName: fuzzIniName, TargetName: fuzzTarget,
		SessionType: "Normal", Offer: offer, Traditional: traditional, ISID: 0x800000000000 | s.r.isid.Add(1)})
	out := li.Start(nil)
	for {
		s.sendPDU(iser.HeaderFields{}, out)
		var resp []byte
		select {
		case resp = <-s.rx:
		case <-time.After(5 * time.Second):
			return errors.New("no Login Response within 5 s")
		}
		var done bool
		var err error
		if out, done, err = li.Step(nil, resp); err != nil {
			return err
		}
		if done {
			break
		}
	}
	res := li.Result()
	s.cmdSN, s.itt = res.CmdSN, 1
	s.mu.Lock()
	s.maxSeg = int(res.Params.PeerMaxRecvDataSegmentLength)
	s.mu.Unlock()
	s.immOK, s.firstBurst = res.Params.ImmediateData, res.Params.FirstBurstLength
	s.cmds = map[uint32]fuzzCmd{}
	if traditional {
		s.hd.Store(res.Params.HeaderDigest)
		s.dd.Store(res.Params.DataDigest)
	}
	return nil
}

// sendPDU sends one iSCSI PDU (BHS, data segment, padding): in a Send
// with the iSER header h, or on the TCP stream with the digests in force.
func (s *fuzzSession) sendPDU(h iser.HeaderFields, pdu []byte) {
	if s.fr != nil {
		msg := make([]byte, iser.HeaderLen+len(pdu))
		h.Encode(msg)
		copy(msg[iser.HeaderLen:], pdu)
		s.write(s.send(msg, nil))
		return
	}
	s.write(s.tcpPDU(pdu, false, false)...)
}

// send frames a Send message as one FPDU; spoil, when set, changes the
// framed octets (the CRC is computed before).
func (s *fuzzSession) send(msg []byte, spoil func(hdr, fpdu []byte)) []byte {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	hdr := make([]byte, ddp.UntaggedHeaderLen)
	ddp.UntaggedFields{Last: true, RsvdULP: uint8(rdmap.MakeControl(rdmap.OpSend)), QN: rdmap.QNSend, MSN: s.msn}.Encode(hdr)
	s.msn++
	return s.frame(hdr, msg, spoil)
}

// frame returns the FPDU of a DDP header and payload (callers hold wmu).
func (s *fuzzSession) frame(hdr, payload []byte, spoil func(hdr, fpdu []byte)) []byte {
	if spoil != nil {
		spoil(hdr, nil)
	}
	iov, err := s.fr.AppendFPDU(nil, hdr, payload)
	if err != nil {
		s.t.Fatalf("framing %d octets: %v", len(hdr)+len(payload), err)
	}
	var b []byte
	for _, v := range iov {
		b = append(b, v...)
	}
	s.fr.Reset()
	if spoil != nil {
		spoil(nil, b)
	}
	return b
}

// readISER deframes the target's stream: Sends go to rx, RDMA Read
// Requests are answered from the region.
func (s *fuzzSession) readISER() {
	defer s.wg.Done()
	buf := make([]byte, 256<<10)
	var seg []byte
	for {
		n, err := s.nc.Read(buf)
		if err != nil {
			s.dead.Store(true)
			return
		}
		raw := buf[:n]
		for len(raw) > 0 {
			ev, data, k, err := s.df.Next(raw)
			raw = raw[k:]
			if err != nil {
				s.dead.Store(true)
				return
			}
			switch ev {
			case mpa.ULPDUStart:
				seg = seg[:0]
			case mpa.ULPDUData:
				seg = append(seg, data...)
			case mpa.FPDUEnd:
				s.segment(seg)
			}
		}
	}
}

// segment handles one DDP Segment from the target.
func (s *fuzzSession) segment(seg []byte) {
	h, payload, err := rdmap.Parse(seg)
	if err != nil {
		return
	}
	switch op := rdmap.ControlOf(h).Opcode(); op {
	case rdmap.OpSend, rdmap.OpSendInvalidate, rdmap.OpSendSE, rdmap.OpSendSEInvalidate:
		if len(payload) >= iser.HeaderLen {
			s.received.Add(1)
			select {
			case s.rx <- append([]byte(nil), payload[iser.HeaderLen:]...):
			default:
			}
		}
	case rdmap.OpReadRequest:
		rr, err := rdmap.ParseReadRequest(payload)
		if err == nil {
			s.answerRead(rr)
		}
	}
}

// answerRead sends the RDMA Read Response for rr from the region, unless
// it lies outside it, the input said not to answer, or a spoiler applies.
func (s *fuzzSession) answerRead(rr rdmap.ReadRequest) {
	s.lastR.Store(rr.SinkSTag())
	s.lastRTO.Store(rr.SinkTO())
	spoil := int(s.spoil.Swap(spoilNone))
	if s.flags&fzNoAnswer != 0 || spoil == spoilSkip || rr.SrcSTag() != fuzzRegSTag {
		return
	}
	off, size := rr.SrcTO()-fuzzRegBase, uint64(rr.Size())
	if rr.SrcTO() < fuzzRegBase || off+size > fuzzRegion || off+size < off {
		return
	}
	s.mu.Lock()
	src := append([]byte(nil), s.region[off:off+size]...)
	s.mu.Unlock()
	if spoil == spoilHalf {
		src = src[:len(src)/2]
	}
	sinkTO := rr.SinkTO()
	if spoil == spoilOff {
		sinkTO += 512
	}
	const segLen = 16 << 10
	var out [][]byte
	s.wmu.Lock()
	for done := 0; done < len(src) || done == 0; {
		k := min(segLen, len(src)-done)
		hdr := make([]byte, ddp.TaggedHeaderLen)
		last := done+k == int(size)
		ddp.TaggedFields{Last: last, RsvdULP: uint8(rdmap.MakeControl(rdmap.OpReadResponse)),
			STag: rr.SinkSTag(), TO: sinkTO + uint64(done)}.Encode(hdr)
		var sp func(hdr, fpdu []byte)
		if spoil == spoilCRC && done == 0 {
			sp = func(_, fpdu []byte) {
				if fpdu != nil && len(fpdu) > mpa.LengthSize+ddp.TaggedHeaderLen+k/2 {
					fpdu[mpa.LengthSize+ddp.TaggedHeaderLen+k/2] ^= 0x40
				}
			}
		}
		out = append(out, s.frame(hdr, src[done:done+k], sp))
		done += k
		if k == 0 {
			break
		}
	}
	s.wmu.Unlock()
	s.write(out...)
}

// startTCP connects to the iSCSI/TCP portal and logs in.
func (s *fuzzSession) startTCP() error {
	nc, err := net.DialTimeout("tcp", s.r.tcpAddr, 5*time.Second)
	if err != nil {
		return err
	}
	s.nc = nc
	s.rx = make(chan []byte, 1024)
	s.wg.Add(1)
	go s.readTCP()
	return s.login(true)
}

// tcpPDU returns the stream octets of a PDU with padding and the digests
// in force; badHD and badDD spoil them.
func (s *fuzzSession) tcpPDU(pdu []byte, badHD, badDD bool) [][]byte {
	bhs := iscsi.BHS(pdu[:iscsi.BHSLen])
	out := [][]byte{pdu[:iscsi.BHSLen]}
	if s.hd.Load() {
		d := make([]byte, iscsi.DigestLen)
		sum := iscsi.Digest(pdu[:iscsi.BHSLen])
		if badHD {
			sum ^= 1
		}
		iscsi.PutDigest(d, sum)
		out = append(out, d)
	}
	data := pdu[iscsi.BHSLen:]
	dsl := int(bhs.DataSegmentLength())
	if dsl == 0 {
		return out
	}
	padded := bhs.PaddedDataLength()
	if len(data) < padded {
		data = append(append([]byte(nil), data...), make([]byte, padded-len(data))...)
	}
	data = data[:padded]
	out = append(out, data)
	if s.dd.Load() {
		d := make([]byte, iscsi.DigestLen)
		sum := iscsi.Digest(data)
		if badDD {
			sum ^= 1
		}
		iscsi.PutDigest(d, sum)
		out = append(out, d)
	}
	return out
}

// readTCP reads the target's PDUs: R2Ts are answered with Data-Out, the
// rest go to rx.
func (s *fuzzSession) readTCP() {
	defer s.wg.Done()
	var hdr [iscsi.BHSLen + iscsi.DigestLen]byte
	data := make([]byte, 300<<10)
	for {
		// Digests come on with the login's end: look after the BHS.
		if _, err := io.ReadFull(s.nc, hdr[:iscsi.BHSLen]); err != nil {
			s.dead.Store(true)
			return
		}
		if s.hd.Load() {
			if _, err := io.ReadFull(s.nc, hdr[iscsi.BHSLen:]); err != nil {
				s.dead.Store(true)
				return
			}
		}
		bhs := iscsi.BHS(hdr[:iscsi.BHSLen])
		dl := bhs.PaddedDataLength()
		if dl > 0 && s.dd.Load() {
			dl += iscsi.DigestLen
		}
		if dl > len(data) {
			s.dead.Store(true)
			return
		}
		if _, err := io.ReadFull(s.nc, data[:dl]); err != nil {
			s.dead.Store(true)
			return
		}
		if bhs.Opcode() == iscsi.OpR2T {
			r2t, _ := iscsi.AsR2T(bhs)
			s.answerR2T(r2t)
			continue
		}
		s.received.Add(1)
		pdu := append(append([]byte(nil), bhs...), data[:bhs.DataSegmentLength()]...)
		select {
		case s.rx <- pdu:
		default:
		}
	}
}

// answerR2T sends the Data-Out PDUs an R2T asks for.
func (s *fuzzSession) answerR2T(r iscsi.R2T) {
	spoil := int(s.spoil.Swap(spoilNone))
	if s.flags&fzNoAnswer != 0 || spoil == spoilSkip {
		return
	}
	s.mu.Lock()
	c, ok := s.cmds[r.ITT()]
	maxSeg := s.maxSeg
	s.mu.Unlock()
	if !ok {
		return
	}
	off, n := r.BufferOffset(), r.DesiredDataTransferLength()
	if n > 4<<20 {
		return
	}
	if spoil == spoilHalf {
		n /= 2
	}
	if spoil == spoilOff {
		off += 512
	}
	seg := uint32(max(maxSeg, 512))
	var out [][]byte
	for done, sn := uint32(0), uint32(0); done < n; sn++ {
		k := min(seg, n-done)
		pdu := make([]byte, iscsi.BHSLen+int(k))
		b, _ := iscsi.Init(pdu, iscsi.OpSCSIDataOut)
		d, _ := iscsi.AsSCSIDataOut(b)
		b.SetFinal(done+k == r.DesiredDataTransferLength())
		b.SetLUN(r.LUN())
		b.SetITT(r.ITT())
		d.SetTTT(r.TTT())
		d.SetDataSN(sn)
		d.SetBufferOffset(off + done)
		b.SetDataSegmentLength(k)
		fillData(pdu[iscsi.BHSLen:], c.seed, int64(off+done))
		badDD := false
		if spoil == spoilCRC && done == 0 {
			if s.dd.Load() {
				// The data spoiled under a digest of the data as sent.
				badDD = true
			} else {
				d.SetDataSN(sn + 1)
			}
		}
		out = append(out, s.tcpPDU(pdu, false, badDD)...)
		done += k
	}
	s.write(out...)
}

// finish pings the target so that what was sent is handled, then closes.
func (s *fuzzSession) finish() {
	const pingITT = 0x0eedf00d
	if !s.dead.Load() {
		s.sendPDU(iser.HeaderFields{}, nopOut(pingITT, s.cmdSN, nil))
		deadline := time.After(2 * time.Second)
	wait:
		for !s.dead.Load() {
			select {
			case p := <-s.rx:
				if len(p) >= iscsi.BHSLen && iscsi.BHS(p).Opcode() == iscsi.OpNOPIn && iscsi.BHS(p).ITT() == pingITT {
					break wait
				}
			case <-deadline:
				break wait
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	s.wmu.Lock()
	s.dead.Store(true)
	s.nc.Close()
	s.wmu.Unlock()
}

// The CDB templates the fuzzer picks from.
var fuzzCDBs = []struct {
	op    byte
	len   int
	write bool // W flag in the template
	read  bool // R flag
}{
	{0x88, 16, false, true},  // READ(16)
	{0x8a, 16, true, false},  // WRITE(16)
	{0x28, 10, false, true},  // READ(10)
	{0x2a, 10, true, false},  // WRITE(10)
	{0x08, 6, false, true},   // READ(6)
	{0x0a, 6, true, false},   // WRITE(6)
	{0xaa, 12, true, false},  // WRITE(12)
	{0x00, 6, false, false},  // TEST UNIT READY
	{0x12, 6, false, true},   // INQUIRY
	{0x9e, 16, false, true},  // READ CAPACITY(16)
	{0x1a, 6, false, true},   // MODE SENSE(6)
	{0x35, 10, false, false}, // SYNCHRONIZE CACHE(10)
	{0x93, 16, true, false},  // WRITE SAME(16)
	{0x8e, 16, true, false},  // WRITE AND VERIFY(16)
	{0xa0, 12, false, true},  // REPORT LUNS
	{0x41, 10, true, false},  // WRITE SAME(10)
	{0x03, 6, false, true},   // REQUEST SENSE
	{0x2f, 10, false, false}, // VERIFY(10)
}

// fuzzKnownOp reports whether op is one of the templates' opcodes: a byte
// flip that makes another opcode becomes TEST UNIT READY, so that every
// command that can write is one whose range check knows.
func fuzzKnownOp(op byte) bool {
	for _, c := range fuzzCDBs {
		if c.op == op {
			return true
		}
	}
	return false
}

// op decodes and sends the next operation of the input.
func (s *fuzzSession) op() {
	switch k := s.b() % 16; k {
	case 4:
		s.sendPDU(iser.HeaderFields{}, s.nopPDU())
	case 5:
		s.sendPDU(iser.HeaderFields{}, s.tmfPDU())
	case 6:
		s.sendPDU(iser.HeaderFields{}, s.textPDU())
	case 7:
		s.sendPDU(iser.HeaderFields{}, s.logoutPDU())
	case 8:
		s.sendPDU(iser.HeaderFields{}, s.dataOutPDU())
	case 9:
		s.mutated()
	case 10:
		s.corrupt()
	case 11:
		time.Sleep(time.Duration(s.b()%32) * time.Millisecond)
	case 12:
		s.spoil.Store(int32(s.b() % spoilKinds))
	default:
		s.sendCommand(s.commandPDU())
	}
}

// nextITT returns a fresh ITT, or one used before when sel says so.
func (s *fuzzSession) nextITT(reuse bool, sel byte) uint32 {
	if reuse && len(s.lastITTs) > 0 {
		return s.lastITTs[int(sel)%len(s.lastITTs)]
	}
	s.itt++
	s.lastITTs = append(s.lastITTs, s.itt)
	return s.itt
}

// sn returns the CmdSN to send and whether the PDU is immediate, as sel
// says: mostly the next one in order.
func (s *fuzzSession) sn(b iscsi.BHS, sel byte) {
	sns := iscsi.InitiatorSNs{BHS: b}
	switch {
	case sel%8 < 6:
		sns.SetCmdSN(s.cmdSN)
		s.cmdSN++
	case sel%8 == 6:
		b.SetImmediate(true)
		sns.SetCmdSN(s.cmdSN)
	default:
		sns.SetCmdSN(s.cmdSN + uint32(int8(sel)>>3|1)) // never the one expected
	}
}

func (s *fuzzSession) lun(sel byte) iscsi.LUN {
	switch sel % 8 {
	case 0, 1, 2, 3, 4:
		return 0
	case 5, 6:
		l, _ := iscsi.MakeLUN(1)
		return l
	}
	l, _ := iscsi.MakeLUN(uint16(sel))
	return l
}

// commandPDU builds a SCSI Command from a template and the input: CDB,
// LUN, LBA, blocks, EDTL, immediate data, CmdSN, flags and, over iSER,
// the header's STags. Its write data is D(seed) and, over iSER, is put in
// the region where the header says.
func (s *fuzzSession) commandPDU() (iser.HeaderFields, []byte, uint32) {
	tpl := fuzzCDBs[int(s.b())%len(fuzzCDBs)]
	lunSel := s.b()
	lba := uint64(s.u16()) % 2100
	nb := s.b()
	blocks := uint32(nb & 0x3f)
	if nb&0xc0 == 0xc0 {
		blocks *= 32
	}
	edtlSel, immSel, snSel, flagSel, stagSel := s.b(), s.b(), s.b(), s.b(), s.b()
	cdb := make([]byte, tpl.len)
	cdb[0] = tpl.op
	switch tpl.len {
	case 6:
		cdb[1], cdb[2], cdb[3], cdb[4] = byte(lba>>16)&0x1f, byte(lba>>8), byte(lba), byte(blocks)
	case 10:
		binary.BigEndian.PutUint32(cdb[2:], uint32(lba))
		binary.BigEndian.PutUint16(cdb[7:], uint16(blocks))
	case 12:
		binary.BigEndian.PutUint32(cdb[2:], uint32(lba))
		binary.BigEndian.PutUint32(cdb[6:], blocks)
	case 16:
		binary.BigEndian.PutUint64(cdb[2:], lba)
		binary.BigEndian.PutUint32(cdb[10:], blocks)
	}
	switch tpl.op {
	case 0x12, 0x1a, 0x03: // allocation length
		cdb[4] = byte(blocks * 4)
	case 0x9e:
		cdb[1] = 0x10
		cdb[13] = 32
	case 0xa0:
		binary.BigEndian.PutUint32(cdb[6:], blocks*8+16)
	case 0x93, 0x41:
		if flagSel&0x40 != 0 {
			cdb[1] |= 0x08 // UNMAP
		}
	}
	want := blocks * 512
	if tpl.op == 0x93 || tpl.op == 0x41 {
		want = 512
	}
	var edtl uint32
	switch edtlSel % 8 {
	case 0, 1, 2, 3:
		edtl = want
	case 4:
		edtl = want - min(want, 512*uint32(edtlSel>>3&3+1))
	case 5:
		edtl = want + 512
	case 6:
		edtl = uint32(edtlSel) * 37
	case 7:
		edtl = 0
	}
	read, write := tpl.read, tpl.write
	if flagSel&1 != 0 {
		read = !read
	}
	if flagSel&2 != 0 {
		write = !write
	}
	var imm uint32
	if write {
		switch immSel % 8 {
		case 2, 3, 4, 5:
			if s.immOK {
				imm = min(edtl, s.firstBurst, 8192)
			}
		case 6:
			imm = min(uint32(immSel)*33, edtl)
		case 7:
			imm = min(edtl, 8192) + 512
		}
	}
	seed := s.seedBase + s.nCmds
	s.nCmds++
	pdu := make([]byte, iscsi.BHSLen+int(imm)+3)
	b, _ := iscsi.Init(pdu, iscsi.OpSCSICommand)
	c, _ := iscsi.AsSCSICommand(b)
	b.SetFinal(flagSel&8 == 0)
	b.SetLUN(s.lun(lunSel))
	c.SetITT(s.nextITT(flagSel&0x10 != 0, snSel))
	s.sn(b, snSel)
	c.SetCDB(cdb)
	c.SetExpectedDataTransferLength(edtl)
	c.SetRead(read)
	c.SetWrite(write)
	c.SetAttr(flagSel >> 5 & 7)
	b.SetDataSegmentLength(imm)
	fillData(pdu[iscsi.BHSLen:iscsi.BHSLen+int(imm)], seed, 0)
	pdu = pdu[:b.PDULen()]
	s.mu.Lock()
	s.cmds[c.ITT()] = fuzzCmd{seed: seed}
	if s.ittSeeds == nil {
		s.ittSeeds = map[uint32][]uint32{}
	}
	s.ittSeeds[c.ITT()] = append(s.ittSeeds[c.ITT()], seed)
	s.mu.Unlock()

	var h iser.HeaderFields
	if s.fr != nil {
		// The command's buffer in the region: data offset o at pos+o.
		pos := int64(s.nCmds%16) * (fuzzRegion / 16)
		if int64(edtl) > fuzzRegion/16 {
			pos = 0
		}
		if int64(edtl) <= fuzzRegion {
			s.mu.Lock()
			fillData(s.region[pos:pos+int64(edtl)], seed, 0)
			s.mu.Unlock()
		}
		h = iser.HeaderFields{ReadValid: read, ReadSTag: fuzzRegSTag, ReadBaseOffset: fuzzRegBase + uint64(pos),
			WriteValid: write, WriteSTag: fuzzRegSTag, WriteBaseOffset: fuzzRegBase + uint64(pos) + uint64(imm)}
		switch stagSel % 8 {
		case 5:
			h.WriteValid, h.ReadValid = !h.WriteValid, !h.ReadValid
		case 6:
			h.WriteBaseOffset += uint64(int64(int8(stagSel)) * 64)
			h.ReadBaseOffset += uint64(int64(int8(stagSel)) * 64)
		case 7:
			h.WriteSTag ^= uint32(stagSel) << 8
			h.ReadSTag ^= uint32(stagSel) << 8
		}
	}
	return h, pdu, seed
}

// sendCommand records what a SCSI Command PDU about to be sent may write,
// from its octets as sent, and sends it.
func (s *fuzzSession) sendCommand(h iser.HeaderFields, pdu []byte, seed uint32) {
	b := iscsi.BHS(pdu)
	c, _ := iscsi.AsSCSICommand(b)
	cdb := c.CDB()
	if !fuzzKnownOp(cdb[0]) {
		cdb[0] = 0x00 // the range check knows only the templates' opcodes
	}
	if w, ok := s.writeRange(b, cdb); ok {
		w.seed = seed
		w.region = -1
		w.imm = int64(b.DataSegmentLength())
		if s.fr != nil && h.WriteSTag == fuzzRegSTag && h.WriteBaseOffset >= fuzzRegBase {
			w.region = int64(h.WriteBaseOffset - fuzzRegBase)
		}
		w.cdb = append([]byte(nil), cdb...)
		w.itt = b.ITT()
		s.mu.Lock()
		s.writes = append(s.writes, w)
		s.mu.Unlock()
	}
	s.sendPDU(h, pdu)
}

// writeRange is the LU range a CDB may write.
func (s *fuzzSession) writeRange(b iscsi.BHS, cdb []byte) (fuzzWrite, bool) {
	n, err := b.LUN().Number()
	if err != nil || n > 1 {
		return fuzzWrite{}, false
	}
	size := int64(len(s.r.shadow[n]))
	var lba, blocks int64
	w := fuzzWrite{lun: int(n)}
	blocksOf := size / 512
	switch cdb[0] {
	case 0x0a:
		lba, blocks = int64(cdb[1]&0x1f)<<16|int64(cdb[2])<<8|int64(cdb[3]), int64(cdb[4])
		if blocks == 0 {
			blocks = 256
		}
	case 0x2a, 0x2e, 0x41:
		lba, blocks = int64(binary.BigEndian.Uint32(cdb[2:])), int64(binary.BigEndian.Uint16(cdb[7:]))
	case 0xaa, 0xae:
		lba, blocks = int64(binary.BigEndian.Uint32(cdb[2:])), int64(binary.BigEndian.Uint32(cdb[6:]))
	case 0x8a, 0x8e, 0x93:
		lba, blocks = int64(binary.BigEndian.Uint64(cdb[2:])&(1<<62-1)), int64(binary.BigEndian.Uint32(cdb[10:]))
	default:
		return w, false
	}
	if lba >= blocksOf {
		return w, false
	}
	if cdb[0] == 0x41 || cdb[0] == 0x93 {
		w.same = true
		if blocks == 0 {
			blocks = blocksOf - lba
		}
	}
	if blocks <= 0 {
		return w, false
	}
	w.start, w.end = lba*512, min(lba+blocks, blocksOf)*512
	return w, true
}

// allowed reports whether octet x of LUN lun may now hold v.
func (s *fuzzSession) allowed(lun int, x int64, v byte) bool {
	for i := range s.writes {
		w := &s.writes[i]
		if w.lun != lun || x < w.start || x >= w.end {
			continue
		}
		off := x - w.start
		if w.same {
			if v == 0 {
				return true
			}
			off %= 512
		}
		if v == fuzzData(w.seed, off) {
			return true
		}
		if s.fr == nil {
			for _, seed := range s.ittSeeds[w.itt] {
				if v == fuzzData(seed, off) {
					return true
				}
			}
		}
		if w.region >= 0 && s.region != nil {
			for _, p := range []int64{w.region + off - w.imm, w.region + off} {
				if p >= 0 && p < int64(len(s.region)) && s.region[p] == v {
					return true
				}
			}
		}
	}
	return false
}

func (s *fuzzSession) writesString(lun int) string {
	var b bytes.Buffer
	for _, w := range s.writes {
		if w.lun == lun {
			fmt.Fprintf(&b, "[%d,%d) cdb %x imm %d region %d; ", w.start, w.end, w.cdb, w.imm, w.region)
		}
	}
	return b.String()
}

func (s *fuzzSession) nopPDU() []byte {
	ittSel, snSel, n := s.b(), s.b(), int(s.b())*40
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	p := nopOut(s.nextITT(ittSel&1 != 0, ittSel), s.cmdSN, data)
	b := iscsi.BHS(p)
	b.SetImmediate(false)
	s.sn(b, snSel)
	if ittSel&6 == 6 {
		// An answer to a ping of the target's: reserved ITT, a TTT.
		b.SetITT(iscsi.ReservedITT)
		b.SetImmediate(true)
		o, _ := iscsi.AsNOPOut(b)
		o.SetTTT(uint32(ittSel >> 3))
	}
	return p
}

func (s *fuzzSession) tmfPDU() []byte {
	fn, ref, lunSel, snSel := s.b(), s.b(), s.b(), s.b()
	// The referenced task: ref counts back from the last ITT sent.
	refTT := uint32(ref)
	if n := len(s.lastITTs); n > 0 && ref&0x80 == 0 {
		refTT = s.lastITTs[n-1-int(ref)%n]
	}
	p := pdu(iscsi.OpTaskMgmtReq, func(b iscsi.BHS) {
		b[1] = 0x80 | fn%16
		b.SetITT(s.nextITT(false, 0))
		b.SetLUN(s.lun(lunSel))
		r, _ := iscsi.AsTaskMgmtReq(b)
		r.SetReferencedTaskTag(refTT)
		r.SetRefCmdSN(s.cmdSN - uint32(ref%4))
		b.SetImmediate(true)
		iscsi.InitiatorSNs{BHS: b}.SetCmdSN(s.cmdSN)
		if snSel&1 != 0 {
			b.SetImmediate(false)
			s.sn(b, snSel>>1)
		}
	}, nil)
	return p
}

func (s *fuzzSession) textPDU() []byte {
	sel, snSel := s.b(), s.b()
	var data []byte
	switch sel % 4 {
	case 0:
		data = []byte("SendTargets=All\x00")
	case 1:
		data = []byte("SendTargets=\x00")
	case 2:
		data = []byte("X-vendor=1\x00MaxBurstLength=512\x00")
	case 3:
		data = make([]byte, int(sel)*40)
		for i := range data {
			data[i] = 'a' + byte(i%26)
		}
	}
	return pdu(iscsi.OpTextReq, func(b iscsi.BHS) {
		b.SetITT(s.nextITT(false, 0))
		t, _ := iscsi.AsTextReq(b)
		t.SetTTT(iscsi.ReservedITT)
		t.SetContinue(sel&0x80 != 0)
		s.sn(b, snSel)
	}, data)
}

func (s *fuzzSession) logoutPDU() []byte {
	reason, snSel := s.b(), s.b()
	return pdu(iscsi.OpLogoutReq, func(b iscsi.BHS) {
		b[1] = 0x80 | reason%4
		b.SetITT(s.nextITT(false, 0))
		s.sn(b, snSel)
	}, nil)
}

// dataOutPDU is a Data-Out for one of the commands sent, with fields the
// input chooses: offset, length, TTT, DataSN, F.
func (s *fuzzSession) dataOutPDU() []byte {
	ittSel, tttSel, offSel, lenSel, snSel := s.b(), s.b(), s.b(), s.b(), s.b()
	itt := s.nextITT(true, ittSel)
	off := uint32(offSel) * 512
	n := int(lenSel) * 64
	seed := uint32(0)
	if c, ok := s.cmds[itt]; ok {
		seed = c.seed
	}
	data := make([]byte, n)
	fillData(data, seed, int64(off))
	return pdu(iscsi.OpSCSIDataOut, func(b iscsi.BHS) {
		b.SetITT(itt)
		b.SetFinal(snSel&0x80 != 0)
		d, _ := iscsi.AsSCSIDataOut(b)
		// TTTs are (generation << 16) | task index (target/tcp.go).
		d.SetTTT(uint32(tttSel>>4)<<16 | uint32(tttSel&15))
		d.SetDataSN(uint32(snSel & 7))
		d.SetBufferOffset(off)
	}, data)
}

// mutated sends a PDU of any kind with octets of its BHS flipped.
func (s *fuzzSession) mutated() {
	var h iser.HeaderFields
	var p []byte
	var seed uint32
	switch s.b() % 6 {
	case 0:
		p = s.nopPDU()
	case 1:
		p = s.tmfPDU()
	case 2:
		p = s.textPDU()
	case 3:
		p = s.dataOutPDU()
	default:
		h, p, seed = s.commandPDU()
	}
	for k := int(s.b()%4) + 1; k > 0; k-- {
		pos, x := s.b(), s.b()
		p[int(pos)%iscsi.BHSLen] ^= x
	}
	// Keep the PDU's octets what its (new) BHS announces, up to 16 KiB.
	b := iscsi.BHS(p)
	if b.TotalAHSLength() == 0 {
		if want := b.PDULen(); want <= 16<<10 && want > len(p) {
			p = append(p, make([]byte, want-len(p))...)
		} else if want < len(p) && want >= iscsi.BHSLen {
			p = p[:want]
		}
	}
	if b.Opcode() == iscsi.OpSCSICommand {
		s.sendCommand(h, p, seed)
		return
	}
	s.sendPDU(h, p)
}

// corrupt breaks the framing on purpose.
func (s *fuzzSession) corrupt() {
	kind, p := s.b(), s.b()
	if s.fr == nil {
		s.corruptTCP(kind, p)
		return
	}
	msg := make([]byte, iser.HeaderLen)
	iser.HeaderFields{}.Encode(msg)
	msg = append(msg, nopOut(0x0bad0000|uint32(p), s.cmdSN, nil)...)
	iscsi.BHS(msg[iser.HeaderLen:]).SetImmediate(true)
	switch kind % 8 {
	case 0: // a CRC error
		s.write(s.send(msg, func(_, fpdu []byte) {
			if fpdu != nil {
				fpdu[mpa.LengthSize+ddp.UntaggedHeaderLen+int(p)%(len(msg))] ^= 1 << (p % 8)
			}
		}))
	case 1: // the MPA length field lies
		s.write(s.send(msg, func(_, fpdu []byte) {
			if fpdu != nil {
				binary.BigEndian.PutUint16(fpdu, uint16(p)*uint16(p+1))
			}
		}))
	case 2: // a bad DDP header under a good CRC
		s.write(s.send(msg, func(hdr, _ []byte) {
			if hdr == nil {
				return
			}
			switch p % 6 {
			case 0:
				binary.BigEndian.PutUint32(hdr[6:], uint32(p%4)) // QN
			case 1:
				binary.BigEndian.PutUint32(hdr[10:], binary.BigEndian.Uint32(hdr[10:])+uint32(p)) // MSN
			case 2:
				binary.BigEndian.PutUint32(hdr[14:], uint32(p)*4) // MO
			case 3:
				hdr[0] &^= 0x40 // L
			case 4:
				hdr[0] ^= 0x03 // DDP version
			case 5:
				hdr[1] ^= 0xc0 // RDMAP version
			}
		}))
	case 3: // garbage
		g := make([]byte, int(p)+1)
		for i := range g {
			g[i] = s.b()
		}
		s.write(g)
	case 4, 5: // an RDMA Write or a Read Response to an STag of the input's choosing
		op := rdmap.OpWrite
		if kind%8 == 5 {
			op = rdmap.OpReadResponse
		}
		stag := uint32(s.u16())<<8 | uint32(p)
		to := uint64(s.u16()) * 512
		if kind%8 == 4 && p&0x80 != 0 {
			// Into the last RDMA Read's sink, whose Read has been
			// answered: a placed WRITE's window into the LU must be
			// closed by then.
			stag, to = s.lastR.Load(), s.lastRTO.Load()
		}
		hdr := make([]byte, ddp.TaggedHeaderLen)
		ddp.TaggedFields{Last: true, RsvdULP: uint8(rdmap.MakeControl(op)), STag: stag, TO: to}.Encode(hdr)
		s.wmu.Lock()
		b := s.frame(hdr, make([]byte, 64), nil)
		s.wmu.Unlock()
		s.write(b)
	case 6: // a Terminate from the peer
		hdr := make([]byte, ddp.UntaggedHeaderLen)
		ddp.UntaggedFields{Last: true, RsvdULP: uint8(rdmap.MakeControl(rdmap.OpTerminate)), QN: rdmap.QNTerminate, MSN: 1}.Encode(hdr)
		s.wmu.Lock()
		b := s.frame(hdr, make([]byte, 28), nil)
		s.wmu.Unlock()
		s.write(b)
	case 7: // an RDMA Read Request of the target's memory
		hdr := make([]byte, ddp.UntaggedHeaderLen)
		ddp.UntaggedFields{Last: true, RsvdULP: uint8(rdmap.MakeControl(rdmap.OpReadRequest)), QN: rdmap.QNReadRequest, MSN: 1}.Encode(hdr)
		rr := make([]byte, rdmap.ReadRequestLen)
		src := s.lastR.Load()
		if p&1 != 0 {
			src = uint32(s.u16())<<8 | uint32(p)
		}
		rdmap.ReadRequestFields{SinkSTag: fuzzRegSTag, SinkTO: fuzzRegBase, Size: 512, SrcSTag: src, SrcTO: 0}.Encode(rr)
		s.wmu.Lock()
		b := s.frame(hdr, rr, nil)
		s.wmu.Unlock()
		s.write(b)
	}
}

func (s *fuzzSession) corruptTCP(kind, p byte) {
	np := nopOut(0x0bad0000|uint32(p), s.cmdSN, []byte("ping"))
	iscsi.BHS(np).SetImmediate(true)
	switch kind % 4 {
	case 0: // a header digest error, or an AHS when there is no digest
		if s.hd.Load() {
			s.write(s.tcpPDU(np, true, false)...)
			return
		}
		iscsi.BHS(np).SetTotalAHSLength(p%4 + 1)
		s.write(s.tcpPDU(np, false, false)...)
	case 1: // a data digest error, or a data segment longer than declared
		if s.dd.Load() {
			s.write(s.tcpPDU(np, false, true)...)
			return
		}
		iscsi.BHS(np).SetDataSegmentLength(uint32(p)<<12 | 0x10000)
		s.write(np[:iscsi.BHSLen])
	case 2: // garbage
		g := make([]byte, int(p)+1)
		for i := range g {
			g[i] = s.b()
		}
		s.write(g)
	case 3: // a PDU cut short, then the stream goes on
		out := s.tcpPDU(np, false, false)
		var all []byte
		for _, v := range out {
			all = append(all, v...)
		}
		s.write(all[:int(p)%len(all)])
	}
}

// fuzzSeed is a meaningful input of the seed corpus.
type fuzzSeed struct {
	name string
	data []byte
}

// fuzzSeeds builds the seed corpus: testdata/fuzz/FuzzTargetSession holds
// the same inputs (TestFuzzTargetSeeds keeps them in step).
func fuzzSeeds() []fuzzSeed {
	// cmd: op 0 (SCSI), template, LUN sel, LBA, blocks, EDTL sel, imm sel,
	// CmdSN sel, flags, STag sel.
	cmd := func(tpl byte, lba uint16, blocks, edtl, imm, sn, flags, stag byte) []byte {
		return []byte{0, tpl, 0, byte(lba >> 8), byte(lba), blocks, edtl, imm, sn, flags, stag}
	}
	cat := func(flags byte, ops ...[]byte) []byte {
		b := []byte{flags}
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	read := cmd(0, 16, 8, 0, 0, 0, 0, 0)
	write := cmd(1, 32, 8, 0, 0, 0, 0, 0)         // 4 KiB, immediate data off
	writeImm := cmd(1, 48, 16, 0, 2, 0, 0, 0)     // 8 KiB, all immediate
	writeBig := cmd(1, 64, 0xc4, 0, 2, 0, 0, 0)   // 64 KiB: immediate then solicited
	writeShort := cmd(1, 80, 8, 4, 0, 0, 0, 0)    // EDTL a block short of the CDB
	tmfAbort := []byte{5, 1, 0, 0, 0}             // ABORT TASK of the last ITT
	logout := []byte{7, 0, 0}                     // close the session
	nop := []byte{4, 0, 0, 3}                     // a ping with 120 octets
	badCRC := []byte{10, 0, 5}                    // a Send whose CRC is wrong
	text := []byte{6, 0, 0}                       // SendTargets=All
	spoilHalfOp := []byte{12, spoilHalf}          // the next answer half sent
	spoilCRCOp := []byte{12, spoilCRC}            // the next answer spoiled
	dataOut := []byte{8, 0x00, 0x10, 0, 16, 0x80} // an unsolicited Data-Out
	wait := []byte{11, 10}
	abortUnanswered := cat(fzTCP, []byte{12, spoilSkip}, cmd(1, 0, 0xff, 0, 0, 0, 0, 0), wait, tmfAbort, wait,
		cmd(1, 1800, 63, 0, 0, 0, 0, 0), []byte{11, 31, 11, 31, 11, 31, 11, 31, 11, 31})
	return []fuzzSeed{
		{"iser-read", cat(0, read)},
		{"iser-write", cat(0, write, writeImm, writeBig, read)},
		{"iser-write-short", cat(0, writeShort)},
		{"iser-tmf-abort", cat(fzNoAnswer, write, tmfAbort, wait)},
		{"iser-logout", cat(0, write, wait, logout, read)},
		{"iser-bad-crc", cat(0, write, wait, badCRC, read)},
		{"iser-spoiled-read-response", cat(0, spoilCRCOp, writeBig)},
		{"iser-half-read-response", cat(0, spoilHalfOp, writeBig, wait, tmfAbort)},
		{"iser-write-into-closed-window", cat(0, writeBig, wait, []byte{10, 4, 0x80, 0, 0, 0, 0}, read)},
		{"iser-nop-text", cat(0, nop, text)},
		{"tcp-read", cat(fzTCP, read)},
		{"tcp-write", cat(fzTCP, write, writeImm, writeBig, read)},
		{"tcp-digests-write", cat(fzTCP|fzHdrDigest|fzDataDigest, writeBig, read)},
		{"tcp-tmf-abort", cat(fzTCP|fzNoAnswer, write, tmfAbort, wait)},
		{"tcp-logout", cat(fzTCP, write, wait, logout)},
		{"tcp-bad-data-digest", cat(fzTCP|fzHdrDigest|fzDataDigest, spoilCRCOp, writeBig, []byte{10, 1, 0})},
		{"tcp-bad-header-digest", cat(fzTCP|fzHdrDigest, write, wait, []byte{10, 0, 0}, read)},
		{"tcp-unsolicited-data-out", cat(fzTCP, write, wait, dataOut)},
		{"tcp-half-burst-abort", cat(fzTCP, spoilHalfOp, writeBig, wait, tmfAbort, wait, write)},
		{"tcp-abort-unanswered-r2t", abortUnanswered},
	}
}

// TestFuzzTargetSeeds keeps testdata/fuzz/FuzzTargetSession in step with
// fuzzSeeds: each seed is a file named after it. DDP_WRITE_FUZZ_SEEDS=1
// writes them.
func TestFuzzTargetSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzTargetSession")
	for _, s := range fuzzSeeds() {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		path := filepath.Join(dir, s.name)
		if os.Getenv("DDP_WRITE_FUZZ_SEEDS") == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("seed %s: %v (DDP_WRITE_FUZZ_SEEDS=1 writes the corpus)", s.name, err)
		}
		if string(got) != want {
			t.Errorf("seed %s: the file differs from fuzzSeeds (DDP_WRITE_FUZZ_SEEDS=1 rewrites it)", s.name)
		}
	}
}

// TestAbortWithR2TOutstanding: over iSCSI/TCP, a WRITE whose R2T the
// initiator never answers, aborted, gives its staging back at once: a
// WRITE after it that needs that staging runs. (The target used to wait
// for the aborted task's data for the rest of the session, so every
// command needing staging after it waited forever.)
func TestAbortWithR2TOutstanding(t *testing.T) {
	var in []byte
	for _, s := range fuzzSeeds() {
		if s.name == "tcp-abort-unanswered-r2t" {
			in = s.data
		}
	}
	r := newFuzzRig(t)
	if changed := r.run(t, in); changed < 63*512*9/10 { // a few octets are equal by chance
		t.Fatalf("%d LU octets changed: the 63-block WRITE after the abort did not run", changed)
	}
}
