package siw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// perftest (linux-rdma/perftest) in its rdma_cm mode (-R), as the guest's
// perftest speaks it: Debian's 4.5+0.17, whose programs say "Version: 6.06"
// (upstream tag v4.5-0.17). Both ends connect twice to the server's port
// through rdma_cm: first a control connection, whose QP carries every
// exchange below as one Send per message, each side keeping one receive of
// sizeof(struct pingpong_dest) = 56 octets posted (post_one_recv_wqe, posted
// again as soon as a message is taken); then the test connection, which
// carries only the measured traffic. Every exchange is ctx_xchg_data or
// ctx_hand_shake: the client Sends first and then receives, the server
// receives and then Sends, so at most one message is in flight each way.
//
//	exchange_versions   16 octets each way: char version[16], "6.06"
//	check_sys_data      4 octets: cycle_buffer (page size), be32; then 4: cache line size, be32
//	check_mtu           2 octets: the port's active MTU enum as a decimal C string, "3"
//	create_rdma_cm_connection:
//	  ctx_hand_shake    56 octets: pingpong_dest (still mostly zero)
//	  (the client connects the test QP; the server listens again on the same port)
//	  ctx_hand_shake    56 octets
//	ctx_hand_shake ×3   56 octets: pingpong_dest {qpn, psn, rkey, vaddr, out_reads, gid}
//	                    (send_bw first registers its credit buffer: rkey/vaddr name it)
//	then per verb (no -a, no -b):
//	  write, read       client: traffic; both: hand_shake; xchg_bw_reports
//	                    (5 exchanges of 8 octets: size, iters, peak, avg, msg rate); hand_shake
//	  send              server posts its receives; hand_shake; traffic; hand_shake
//
// pingpong_dest goes field by field big-endian (rdma_write_keys with
// HAVE_ENDIAN). The server of write_bw and read_bw learns that the test is
// over only from the client's next hand_shake; the server of send_bw counts
// -n receives. Over iWARP, send_bw's receiver returns credits (send_rcredit,
// ctx_alloc_credit): after every rx_depth/3rd receive (counted modulo
// rx_depth) it RDMA-Writes its count of receives, a host-order uint32, to
// the sender's credit word, and the sender keeps fewer than rx_depth Sends
// beyond the last credit.

// ptVersion is the perftest version whose exchange this peer speaks, and
// what it claims to be.
const ptVersion = "6.06"

const (
	ptDestLen       = 56   // sizeof(struct pingpong_dest) on x86-64
	ptVersionLen    = 16   // MAX_VERSION
	ptCycleBuffer   = 4096 // our cycle_buffer: the page size, as perftest's
	ptCacheLine     = 64   // our cache_line_size
	ptMTU           = "5"  // IBV_MTU_4096: no smaller than perftest's, so its own stays
	ptDefTxDepth    = 128  // DEF_TX_BW
	ptDefRxSend     = 512  // DEF_RX_SEND
	ptCreditWordLen = 4
)

// ptDest is perftest's struct pingpong_dest. On the wire: lid, out_reads,
// qpn, psn, rkey at 0..19, 4 octets of padding, vaddr at 24, gid at 32,
// srqn at 48, gid_index at 52; every integer big-endian.
type ptDest struct {
	LID, OutReads, QPN, PSN, RKey uint32
	VAddr                         uint64
	GID                           [16]byte
	SRQN, GIDIndex                uint32
}

func (d ptDest) marshal() []byte {
	b := make([]byte, ptDestLen)
	be := binary.BigEndian
	be.PutUint32(b[0:], d.LID)
	be.PutUint32(b[4:], d.OutReads)
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	be.PutUint32(b[52:], d.GIDIndex)
	return b
}

func parsePtDest(b []byte) (ptDest, error) {
	if len(b) != ptDestLen {
		return ptDest{}, fmt.Errorf("pingpong_dest of %d octets, want %d", len(b), ptDestLen)
	}
	be := binary.BigEndian
	d := ptDest{LID: be.Uint32(b[0:]), OutReads: be.Uint32(b[4:]), QPN: be.Uint32(b[8:]), PSN: be.Uint32(b[12:]),
		RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[48:]), GIDIndex: be.Uint32(b[52:])}
	copy(d.GID[:], b[32:48])
	return d, nil
}

func (d ptDest) String() string {
	return fmt.Sprintf("QPN %#06x PSN %#06x RKey %#08x VAddr %#016x OUT %d", d.QPN, d.PSN, d.RKey, d.VAddr, d.OutReads)
}

// ptReport is struct bw_report_data as xchg_bw_reports sends it to a peer
// of version 5.33 or later: size and iters as be64, then bw_peak, bw_avg
// and msgRate_avg (MiB/s and Mpps) as IEEE 754 doubles in big-endian order.
type ptReport struct {
	Size, Iters        uint64
	Peak, Avg, MsgRate float64
}

func (r ptReport) fields() [5][]byte {
	var f [5][]byte
	for i, v := range []uint64{r.Size, r.Iters, math.Float64bits(r.Peak), math.Float64bits(r.Avg), math.Float64bits(r.MsgRate)} {
		f[i] = binary.BigEndian.AppendUint64(nil, v)
	}
	return f
}

func parsePtReport(f [5][]byte) ptReport {
	u := func(i int) uint64 { return binary.BigEndian.Uint64(f[i]) }
	return ptReport{Size: u(0), Iters: u(1), Peak: math.Float64frombits(u(2)), Avg: math.Float64frombits(u(3)), MsgRate: math.Float64frombits(u(4))}
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ptVerb is the perftest program: ib_send_bw, ib_write_bw or ib_read_bw.
type ptVerb string

const (
	ptSend  ptVerb = "send"
	ptWrite ptVerb = "write"
	ptRead  ptVerb = "read"
)

func (v ptVerb) program() string { return "ib_" + string(v) + "_bw" }

// ptParams are the parameters both ends of one perftest run agree on: the
// ones on perftest's command line, and what perftest derives from them
// (force_dependecies in perftest_parameters.c).
type ptParams struct {
	verb        ptVerb
	size, iters int
	// cycle and line are cycle_buffer and cache_line_size as both ends
	// agreed (the larger of each, check_sys_data); 0 before the exchange
	// means ours.
	cycle, line int
}

func (p ptParams) cycleBuffer() int { return cmp.Or(p.cycle, ptCycleBuffer) }
func (p ptParams) cacheLine() int   { return cmp.Or(p.line, ptCacheLine) }

// inc is perftest's INC(size): the distance between consecutive messages
// in a cycled buffer, at least a cache line.
func (p ptParams) inc() int {
	l := p.cacheLine()
	return max(l, (p.size+l-1)/l*l)
}

// args are perftest's arguments. -F keeps perftest going when it cannot
// calibrate its cycle counter: under TCG its linear regression of cycles
// against gettimeofday (sample_get_cpu_mhz) sometimes finds r^2 < 0.9, and
// without -F print_report_bw then exits 1 ("Can't produce a report"); with
// -F it reports inf or nan MB/s instead.
func (p ptParams) args(port int) []string {
	return []string{"-R", "-F", "-p", strconv.Itoa(port), "-s", strconv.Itoa(p.size), "-n", strconv.Itoa(p.iters)}
}

// txDepth is perftest's tx_depth: 128, at most -n.
func (p ptParams) txDepth() int { return min(ptDefTxDepth, p.iters) }

// rxDepth is send_bw's rx_depth: 512, at most -n, and made even ("WA for
// a bug when rx_depth is odd in SEND").
func (p ptParams) rxDepth() int {
	d := min(ptDefRxSend, p.iters)
	if d%2 == 1 {
		d++
	}
	return d
}

// creditEvery is send_bw's credit_cnt: the receiver returns a credit
// whenever its count of receives modulo rx_depth is a multiple of it.
func (p ptParams) creditEvery() int { return max(1, p.rxDepth()/3) }

// bufSize is the length of one half of perftest's data buffer:
// BUFF_SIZE(size, cycle_buffer) rounded up to the cache line (alloc_ctx).
func (p ptParams) bufSize() int {
	n, l := max(p.size, p.cycleBuffer()), p.cacheLine()
	return (n + l - 1) / l * l
}

// ptCycle steps through a buffer as perftest's increase_loc_addr and
// increase_rem_addr do: messages no larger than half the cycle buffer go
// INC(size) apart, starting over every cycle_buffer/INC(size) messages;
// larger ones all go to the start.
type ptCycle struct {
	base, addr uint64
	inc, slots uint64
	cycles     bool
}

func newPtCycle(base uint64, p ptParams) ptCycle {
	inc := uint64(p.inc())
	return ptCycle{base: base, addr: base, inc: inc, slots: uint64(p.cycleBuffer()) / inc, cycles: p.size <= p.cycleBuffer()/2}
}

// next returns the address for message n (0-based, in posting order).
func (c *ptCycle) next(n int) uint64 {
	a := c.addr
	if c.cycles {
		c.addr += c.inc
		if (uint64(n)+1)%c.slots == 0 {
			c.addr = c.base
		}
	}
	return a
}

// ptComm is our end of perftest's control connection.
type ptComm struct {
	qp       *iwarp.QP
	scq, rcq *iwarp.CQ
	msgs     *mem.MR // [0:64] the posted receive, [64:128] what we send
	client   bool
	// closed: the last exchange is under way; its receive is not posted
	// again, since perftest may have closed the connection by then.
	closed bool
	// transcript of the exchanges, for failure messages and the log
	transcript []string
}

const ptRecvID, ptSendID = 5, 5 // SYNC_SPEC_ID, as perftest

func (c *ptComm) postRecv() error {
	return c.qp.PostRecv(&iwarp.RecvWR{ID: ptRecvID, SGL: []iwarp.SGE{iwarp.SGEOf(c.msgs, 0, 64)}})
}

func (c *ptComm) wait(ctx context.Context, cq *iwarp.CQ, what string) (iwarp.WC, error) {
	var wcs [1]iwarp.WC
	for {
		if cq.Poll(wcs[:]) == 1 {
			if wcs[0].Status != iwarp.StatusSuccess {
				return wcs[0], fmt.Errorf("%s: %v completion (control QP %v: %v)", what, wcs[0].Status, c.qp.State(), c.qp.Err())
			}
			return wcs[0], nil
		}
		if err := cq.Wait(ctx, false); err != nil {
			return iwarp.WC{}, fmt.Errorf("%s: %w (control QP %v: %v)", what, err, c.qp.State(), c.qp.Err())
		}
	}
}

func (c *ptComm) send(ctx context.Context, what string, b []byte) error {
	if len(b) > ptDestLen {
		return fmt.Errorf("%s: %d octets do not fit perftest's %d-octet receive", what, len(b), ptDestLen)
	}
	copy(c.msgs.Bytes()[64:], b)
	if err := c.qp.PostSend(&iwarp.SendWR{ID: ptSendID, Op: iwarp.OpSend, SGL: []iwarp.SGE{iwarp.SGEOf(c.msgs, 64, len(b))}}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err := c.wait(ctx, c.scq, "Send of "+what)
	return err
}

// recv takes the next message, which must be n octets, and posts the
// receive again before anything else is sent, as perftest does.
func (c *ptComm) recv(ctx context.Context, what string, n int) ([]byte, error) {
	wc, err := c.wait(ctx, c.rcq, "receive of "+what)
	if err != nil {
		return nil, err
	}
	if int(wc.ByteLen) != n {
		return nil, fmt.Errorf("%s: perftest sent %d octets, want %d", what, wc.ByteLen, n)
	}
	b := bytes.Clone(c.msgs.Bytes()[:n])
	if c.closed {
		return b, nil
	}
	if err := c.postRecv(); err != nil {
		return nil, fmt.Errorf("after %s: %w (control QP: %v)", what, err, c.qp.Err())
	}
	return b, nil
}

// xchg is ctx_xchg_data: the client Sends first, the server answers.
func (c *ptComm) xchg(ctx context.Context, what string, out []byte) ([]byte, error) {
	var in []byte
	var err error
	if c.client {
		if err = c.send(ctx, what, out); err == nil {
			in, err = c.recv(ctx, what, len(out))
		}
	} else if in, err = c.recv(ctx, what, len(out)); err == nil {
		err = c.send(ctx, what, out)
	}
	if err != nil {
		return nil, err
	}
	c.transcript = append(c.transcript, fmt.Sprintf("%s: %d octets each way, ours %x, theirs %x", what, len(out), short(out), short(in)))
	return in, nil
}

func short(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

// handShake is ctx_hand_shake: pingpong_dest each way.
func (c *ptComm) handShake(ctx context.Context, what string, mine ptDest) (ptDest, error) {
	in, err := c.xchg(ctx, what, mine.marshal())
	if err != nil {
		return ptDest{}, err
	}
	return parsePtDest(in)
}

// closeHandShake is ctx_close_connection: the last hand_shake. perftest
// tears both connections down right after its half, so our end takes the
// answer without posting another receive.
func (c *ptComm) closeHandShake(ctx context.Context, mine ptDest) error {
	c.closed = true
	_, err := c.handShake(ctx, "hand_shake that closes (ctx_close_connection)", mine)
	return err
}

// ptStdout is what perftest printed that the tests check: the addresses
// of both ends (ctx_print_pingpong_data) and the bandwidth report lines.
type ptStdout struct {
	local, remote []ptAddr
	reports       []ptReport
}

type ptAddr struct{ QPN, PSN uint32 }

var (
	ptAddrLine   = regexp.MustCompile(`(?m)^ (local|remote) address: LID \S+ QPN (0x[0-9a-f]+|0) PSN (0x[0-9a-f]+|0)`)
	ptReportHead = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
)

func parsePtStdout(s string) (ptStdout, error) {
	var out ptStdout
	for _, m := range ptAddrLine.FindAllStringSubmatch(s, -1) {
		qpn, err1 := strconv.ParseUint(m[2], 0, 32)
		psn, err2 := strconv.ParseUint(m[3], 0, 32)
		if err := errors.Join(err1, err2); err != nil {
			return out, fmt.Errorf("address line %q: %w", m[0], err)
		}
		a := ptAddr{QPN: uint32(qpn), PSN: uint32(psn)}
		if m[1] == "local" {
			out.local = append(out.local, a)
		} else {
			out.remote = append(out.remote, a)
		}
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimRight(l, " ") != ptReportHead {
			continue
		}
		for _, r := range lines[i+1:] {
			f := strings.Fields(r)
			if len(f) != 5 {
				break
			}
			var rep ptReport
			var errs [5]error
			rep.Size, errs[0] = strconv.ParseUint(f[0], 10, 64)
			rep.Iters, errs[1] = strconv.ParseUint(f[1], 10, 64)
			rep.Peak, errs[2] = parseCFloat(f[2])
			rep.Avg, errs[3] = parseCFloat(f[3])
			rep.MsgRate, errs[4] = parseCFloat(f[4])
			if err := errors.Join(errs[:]...); err != nil {
				return out, fmt.Errorf("report line %q: %w", r, err)
			}
			out.reports = append(out.reports, rep)
		}
	}
	return out, nil
}

// parseCFloat parses what printf's %f prints, "-nan" included.
func parseCFloat(s string) (float64, error) {
	if strings.EqualFold(strings.TrimLeft(s, "+-"), "nan") {
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// TestPerftestWire checks this package's idea of perftest's messages
// against octets laid out by hand from perftest's structs, and the parsing
// of its output against lines it printed in the guest. It runs anywhere.
func TestPerftestWire(t *testing.T) {
	d := ptDest{LID: 0, OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x01020304, VAddr: 0x00007f0011223344,
		GID: [16]byte{0x82, 0x84, 0, 0x18}, SRQN: 0, GIDIndex: 0}
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, // lid, out_reads, qpn, psn
		1, 2, 3, 4, 0, 0, 0, 0, // rkey, padding
		0, 0, 0x7f, 0, 0x11, 0x22, 0x33, 0x44, // vaddr
		0x82, 0x84, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // gid
		0, 0, 0, 0, 0, 0, 0, 0, // srqn, gid_index
	}
	if got := d.marshal(); !bytes.Equal(got, want) {
		t.Errorf("pingpong_dest:\n got %x\nwant %x", got, want)
	}
	if back, err := parsePtDest(want); err != nil || back != d {
		t.Errorf("parsePtDest = %+v, %v; want %+v", back, err, d)
	}
	if _, err := parsePtDest(want[:55]); err == nil {
		t.Error("parsePtDest took 55 octets")
	}

	r := ptReport{Size: 65536, Iters: 20, Peak: 1.5, Avg: 1.25, MsgRate: 0.000019}
	f := r.fields()
	if !bytes.Equal(f[0], []byte{0, 0, 0, 0, 0, 1, 0, 0}) || !bytes.Equal(f[2], []byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("bw_report fields %x", f)
	}
	if back := parsePtReport(f); back != r {
		t.Errorf("parsePtReport = %+v, want %+v", back, r)
	}

	for _, tc := range []struct {
		p                       ptParams
		tx, rx, credit, bufSize int
	}{
		{ptParams{verb: ptSend, size: 1, iters: 1000}, 128, 512, 170, 4096},
		{ptParams{verb: ptSend, size: 65536, iters: 20}, 20, 20, 6, 65536},
		{ptParams{verb: ptSend, size: 1048576, iters: 5}, 5, 6, 2, 1048576},
		{ptParams{verb: ptSend, size: 100, iters: 7, line: 128}, 7, 8, 2, 4096},
	} {
		if tx, rx, c, b := tc.p.txDepth(), tc.p.rxDepth(), tc.p.creditEvery(), tc.p.bufSize(); tx != tc.tx || rx != tc.rx || c != tc.credit || b != tc.bufSize {
			t.Errorf("%+v: tx_depth %d rx_depth %d credit_cnt %d buffer %d, want %d %d %d %d", tc.p, tx, rx, c, b, tc.tx, tc.rx, tc.credit, tc.bufSize)
		}
	}

	c := newPtCycle(0x1000, ptParams{size: 1})
	var addrs []uint64
	for n := range 66 {
		addrs = append(addrs, c.next(n)-0x1000)
	}
	if addrs[1] != 64 || addrs[63] != 63*64 || addrs[64] != 0 || addrs[65] != 64 {
		t.Errorf("1-octet messages at %v", addrs)
	}
	c = newPtCycle(0x1000, ptParams{size: 65536})
	if a, b := c.next(0), c.next(1); a != 0x1000 || b != 0x1000 {
		t.Errorf("64 KiB messages at %#x, %#x", a, b)
	}

	out := `---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x0004 PSN 0x2f8076
 GID: 82:84:00:18:52:86:00:00:00:00:00:00:00:00:00:00
 remote address: LID 0000 QPN 0x0003 PSN 0x46026a
 GID: 82:84:00:18:52:86:00:00:00:00:00:00:00:00:00:00
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      100              0.00               35.93  		   0.000575
---------------------------------------------------------------------------------------
`
	so, err := parsePtStdout(out)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := ptStdout{local: []ptAddr{{4, 0x2f8076}}, remote: []ptAddr{{3, 0x46026a}},
		reports: []ptReport{{Size: 65536, Iters: 100, Peak: 0, Avg: 35.93, MsgRate: 0.000575}}}
	if fmt.Sprint(so) != fmt.Sprint(wantOut) {
		t.Errorf("parsePtStdout = %+v, want %+v", so, wantOut)
	}
	// What -F makes of a failed calibration.
	so, err = parsePtStdout(ptReportHead + "\n 1048576    5                inf                -nan   \t\t   inf\n")
	if err != nil || len(so.reports) != 1 || !math.IsInf(so.reports[0].Peak, 1) || !math.IsNaN(so.reports[0].Avg) {
		t.Errorf("parsePtStdout of inf and -nan = %+v, %v", so, err)
	}
}
