package iwarp

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/sctp"
)

// benchSizes are the message sizes every throughput benchmark runs, so that
// each can be compared with BenchmarkTCPLoopback of the same size.
var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// benchDepth is the number of operations kept in flight.
const benchDepth = 16

// BenchmarkTCPLoopback is the limit: plain TCP between two goroutines over
// loopback, moving the same sizes with the same writes and reads.
func BenchmarkTCPLoopback(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) { benchTCP(b, sz.n, tcpPlain) })
	}
}

// BenchmarkTCPLoopbackMarkerSplit is why the engine does not place payload
// with Markers by splitting its iovecs: the same plain TCP transfer, the
// receiver reading 508 octets into the destination and 4 into a Marker slot
// for every 512 octets of stream, the only way the kernel could skip
// Markers for it. Beside BenchmarkTCPLoopback it shows what the kernel alone
// charges for those iovecs (splitting the sender's writev the same way
// costs more); BenchmarkMarkersCost shows what the engine's one-pass copies
// cost instead.
func BenchmarkTCPLoopbackMarkerSplit(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) { benchTCP(b, sz.n, tcpSplit) })
	}
}

// How benchTCP's ends treat the stream.
const (
	tcpPlain = iota
	tcpSplit
)

// benchTCP moves b.N buffers of n octets over loopback TCP.
func benchTCP(b *testing.B, n int, mode int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		done <- recvTCP(ln, n, mode)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	cpu.report(b)
}

// recvTCP is benchTCP's receiver: it reads until the sender closes.
func recvTCP(ln net.Listener, n, mode int) error {
	const piece = mpa.MarkerInterval - mpa.MarkerSize
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	rbuf := make([]byte, n)
	if mode == tcpPlain {
		for {
			if _, err := io.ReadFull(c, rbuf); err != nil {
				return nil
			}
		}
	}
	// tcpSplit: 508 octets of destination, then a Marker slot, over and
	// over, about one FPDU per readv.
	s, err := newSock(c.(*net.TCPConn), 0)
	if err != nil {
		return err
	}
	slots := make([]byte, mpa.MarkerSize*(n/piece+1))
	var plan [][]byte
	for off, k := 0, 0; off < n; off, k = off+piece, k+mpa.MarkerSize {
		plan = append(plan, rbuf[off:min(off+piece, n)], slots[k:k+mpa.MarkerSize])
	}
	work := make([][]byte, len(plan))
	var cur [][]byte
	for {
		if len(cur) == 0 { // advance consumes cur in place
			cur = work[:copy(work, plan)]
		}
		got, err := s.readv(cur[:min(len(cur), 2*(64<<10)/mpa.MarkerInterval)], false)
		if err != nil {
			return nil
		}
		cur = advance(cur, got)
	}
}

// benchPair connects two ends for a benchmark.
func benchPair(b *testing.B, markers bool) (ini, resp *end) {
	var cfg ConnConfig
	cfg.MPA.Markers = markers
	return connect(b, cfg, cfg)
}

// drain waits for at least n send completions on e and returns how many it
// took.
func (e *end) drain(n int) int {
	got := 0
	for got < n {
		k := e.scq.Poll(e.wcs[:])
		for _, wc := range e.wcs[:k] {
			if wc.Status != StatusSuccess {
				e.t.Fatalf("%s: %+v (QP err %v)", e.name, wc, e.qp.Err())
			}
		}
		got += k
		if k == 0 {
			if err := e.scq.Wait(e.ctx, false); err != nil {
				e.t.Fatalf("%s: %v (QP err %v)", e.name, err, e.qp.Err())
			}
		}
	}
	return got
}

// runWindow posts b.N work requests keeping benchDepth in flight.
func runWindow(b *testing.B, e *end, wr *SendWR) { runN(b, e, wr, b.N) }

// runN posts n work requests keeping benchDepth in flight and waits for
// them all.
func runN(b *testing.B, e *end, wr *SendWR, n int) {
	inflight := 0
	for i := range n {
		if inflight == benchDepth {
			inflight -= e.drain(1)
		}
		wr.ID = uint64(i)
		if err := e.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	e.drain(inflight)
}

// cpuClock measures the CPU time (user and system, every thread) the
// process spends in a benchmark's timed loop. Both ends of the connection
// live in this process, so it is the whole cost of moving the bytes; on a
// shared machine it varies far less than the wall-clock MB/s.
type cpuClock struct{ start int64 }

func cpuNow() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU() cpuClock { return cpuClock{cpuNow()} }

// report adds the CPU time per operation as the metric cpu-ns/op.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRDMAWrite measures RDMA Write throughput with CRCs on, for each
// size first with Markers off, then with Markers both ways ("1MiB-Markers"),
// so that the two run next to each other; then over DDP/SCTP on userspace
// SCTP ("1MiB-SCTP", sctp-udp) and on kernel SCTP where the kernel has it
// ("1MiB-KernelSCTP").
func BenchmarkRDMAWrite(b *testing.B) {
	for _, sz := range benchSizes {
		for _, markers := range []bool{false, true} {
			name := sz.name
			if markers {
				name += "-Markers"
			}
			b.Run(name, func(b *testing.B) {
				ini, resp := benchPair(b, markers)
				wr := &SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, sz.n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				b.ResetTimer()
				cpu := startCPU()
				runWindow(b, ini, wr)
				// A Read round trip: every Write before it has been placed.
				rd := &SendWR{Op: OpRead, SGL: []SGE{ini.sge(0, 1)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
				if err := ini.qp.PostSend(rd); err != nil {
					b.Fatal(err)
				}
				ini.drain(1)
				cpu.report(b)
			})
		}
	}
	benchWriteSCTP(b, sctp.NetworkUDP, "-SCTP")
	if sctp.KernelAvailable() {
		benchWriteSCTP(b, sctp.NetworkKernel, "-KernelSCTP")
	}
}

// BenchmarkMarkersCost measures what Markers cost RDMA Write, with CRCs
// on. Two connections, one with Markers both ways and one without, take
// turns moving 16 MiB blocks of writes, each block ended by a Read round
// trip so that all of it has been placed: both see the same machine, load
// drifts and all, which separate benchmarks seconds apart do not. It
// reports each connection's median block throughput and median CPU time
// per block (medians shrug off the bursts of a shared machine), and the
// Markers' extra over the plain connection as cost-% (throughput) and
// cpu-cost-%.
func BenchmarkMarkersCost(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			type side struct {
				ini, resp *end
				wr, rd    *SendWR
				ns, cpu   []float64 // per operation, one entry per block
			}
			block := max(1, (16<<20)/sz.n)
			var sides [2]side
			for i, markers := range []bool{false, true} {
				s := &sides[i]
				s.ini, s.resp = benchPair(b, markers)
				s.wr = &SendWR{Op: OpWrite, SGL: []SGE{s.ini.sge(0, sz.n)}, RemoteSTag: s.resp.mr.STag(), RemoteTO: s.resp.mr.BaseTO()}
				s.rd = &SendWR{Op: OpRead, SGL: []SGE{s.ini.sge(0, 1)}, RemoteSTag: s.resp.mr.STag(), RemoteTO: s.resp.mr.BaseTO()}
				s.ns = make([]float64, 0, b.N/block+2)
				s.cpu = make([]float64, 0, b.N/block+2)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				for i := range sides {
					s := &sides[i]
					n := min(block, b.N-done)
					if n == 0 {
						break
					}
					t0, c0 := time.Now(), cpuNow()
					runN(b, s.ini, s.wr, n)
					if err := s.ini.qp.PostSend(s.rd); err != nil {
						b.Fatal(err)
					}
					s.ini.drain(1)
					s.ns = append(s.ns, float64(time.Since(t0).Nanoseconds())/float64(n))
					s.cpu = append(s.cpu, float64(cpuNow()-c0)/float64(n))
					done += n
				}
			}
			plain, marked := &sides[0], &sides[1]
			if len(marked.ns) == 0 {
				return // b.N too small to compare
			}
			mbps := func(s *side) float64 { return float64(sz.n) / median(s.ns) * 1e3 }
			b.ReportMetric(mbps(plain), "plain-MB/s")
			b.ReportMetric(mbps(marked), "markers-MB/s")
			b.ReportMetric(100*(1-mbps(marked)/mbps(plain)), "cost-%")
			b.ReportMetric(100*(median(marked.cpu)/median(plain.cpu)-1), "cpu-cost-%")
		})
	}
}

// median returns the median of v, reordering it.
func median(v []float64) float64 {
	slices.Sort(v)
	return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
}

// BenchmarkRDMARead measures RDMA Read throughput: the data flows from the
// responder to the initiator.
func BenchmarkRDMARead(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			ini, resp := benchPair(b, false)
			wr := &SendWR{Op: OpRead, SGL: []SGE{ini.sge(0, sz.n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			runWindow(b, ini, wr)
			cpu.report(b)
		})
	}
}

// BenchmarkSend measures Send throughput into receives that the receiver
// reposts as they complete.
func BenchmarkSend(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			ini, resp := benchPair(b, false)
			const posted = 64
			for i := range posted {
				if err := resp.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{resp.sge(i*sz.n%(testBuf-sz.n), sz.n)}}); err != nil {
					b.Fatal(err)
				}
			}
			// The ULP's flow control: a Send goes out only when the
			// receiver has a receive posted for it (iSER uses credits).
			var reposted atomic.Int64
			reposted.Store(posted)
			stop := make(chan struct{})
			recvd := make(chan error, 1)
			go func() {
				var wcs [32]WC
				rwr := &RecvWR{SGL: make([]SGE, 1)}
				for got := 0; got < b.N; {
					n := resp.rcq.Poll(wcs[:])
					for _, wc := range wcs[:n] {
						if wc.Status != StatusSuccess {
							recvd <- fmt.Errorf("%+v: %v", wc, resp.qp.Err())
							return
						}
						rwr.ID = wc.WRID
						rwr.SGL[0] = resp.sge(int(wc.WRID)*sz.n%(testBuf-sz.n), sz.n)
						if err := resp.qp.PostRecv(rwr); err != nil {
							recvd <- err
							return
						}
						reposted.Add(1)
					}
					got += n
					if n == 0 {
						if err := resp.rcq.Wait(resp.ctx, false); err != nil {
							recvd <- err
							return
						}
					}
				}
				recvd <- nil
				<-stop
			}()
			wr := &SendWR{Op: OpSend, SGL: []SGE{ini.sge(0, sz.n)}}
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			b.ResetTimer()
			inflight := 0
			for i := range b.N {
				for inflight == benchDepth || int64(i) >= reposted.Load() {
					if inflight > 0 {
						inflight -= ini.drain(1)
					} else {
						runtime.Gosched()
					}
				}
				wr.ID = uint64(i)
				if err := ini.qp.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				inflight++
			}
			ini.drain(inflight)
			if err := <-recvd; err != nil {
				b.Fatal(err)
			}
			close(stop)
		})
	}
}

// BenchmarkSendLatency measures the round trip of a small Send answered by
// a small Send (ping-pong, one in flight).
func BenchmarkSendLatency(b *testing.B) {
	ini, resp := benchPair(b, false)
	const n = 64
	for _, e := range []*end{ini, resp} {
		for i := range 4 {
			if err := e.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{e.sge(1<<20+i*n, n)}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	errc := make(chan error, 1)
	go func() { // the responder echoes
		var wcs [4]WC
		swr := &SendWR{Op: OpSend, SGL: []SGE{resp.sge(0, n)}}
		rwr := &RecvWR{SGL: make([]SGE, 1)}
		for i := 0; i < b.N; {
			k := resp.rcq.Poll(wcs[:])
			for _, wc := range wcs[:k] {
				rwr.ID, rwr.SGL[0] = wc.WRID, resp.sge(1<<20+int(wc.WRID)*n, n)
				if err := resp.qp.PostRecv(rwr); err != nil {
					errc <- err
					return
				}
				if err := resp.qp.PostSend(swr); err != nil {
					errc <- err
					return
				}
				i++
			}
			for resp.scq.Poll(wcs[:]) > 0 {
			}
			if k == 0 {
				if err := resp.rcq.Wait(context.Background(), false); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- nil
	}()
	var wcs [4]WC
	swr := &SendWR{Op: OpSend, SGL: []SGE{ini.sge(0, n)}}
	rwr := &RecvWR{SGL: make([]SGE, 1)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := ini.qp.PostSend(swr); err != nil {
			b.Fatal(err)
		}
		for {
			if k := ini.rcq.Poll(wcs[:1]); k == 1 {
				rwr.ID, rwr.SGL[0] = wcs[0].WRID, ini.sge(1<<20+int(wcs[0].WRID)*n, n)
				if err := ini.qp.PostRecv(rwr); err != nil {
					b.Fatal(err)
				}
				break
			}
			if err := ini.rcq.Wait(context.Background(), false); err != nil {
				b.Fatal(err)
			}
		}
		for ini.scq.Poll(wcs[:]) > 0 {
		}
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
