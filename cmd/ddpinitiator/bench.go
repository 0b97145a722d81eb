package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"golang.org/x/sys/unix"
)

const benchHelp = `usage: ddpinitiator bench [flags] [PORTAL]

Drives I/O against one LUN of --target over iSER, in this process (no FUSE,
no kernel block layer), and reports IOPS, bandwidth and latency. On a
terminal a progress line is updated once a second.

With --verify every written block carries its LBA and a generation number,
and every read of a block written in this run is checked (read modes
first fill the region). Workers own disjoint blocks, so the check is exact.

`

// benchOpts are bench's settings.
type benchOpts struct {
	lun      int
	rw       string
	bs       config.Size
	iodepth  int
	runtime  time.Duration
	size     config.Size
	verify   bool
	json     bool
	progress string
}

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	o := benchOpts{bs: 4 * config.KiB}
	fs.IntVar(&o.lun, "lun", 0, "the LUN to drive")
	fs.StringVar(&o.rw, "rw", "randread", "read, write, randread, randwrite or randrw (half reads)")
	fs.Var(&o.bs, "bs", "block size of each I/O (512 to 16MiB, a multiple of 512)")
	fs.IntVar(&o.iodepth, "iodepth", 32, "I/Os in flight (1 to 1024)")
	fs.DurationVar(&o.runtime, "runtime", 10*time.Second, "how long to run")
	fs.Var(&o.size, "size", "the part of the LUN to use, from LBA 0 (default: all of it)")
	fs.BoolVar(&o.verify, "verify", false, "check that what is read is what was written")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.StringVar(&o.progress, "progress", "auto", "progress line once a second: auto (on a terminal), always, never")
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, benchHelp)
	if !ok {
		return code
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator bench: %v\n", err)
		return exitUsage
	}
	bs := int(o.bs)
	target, err := c.targetName()
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: %v\n", err)
		return exitUsage
	}
	s, dev, err := c.dial(ctx, portal, target, initiator.Config{QueueDepth: o.iodepth, Buffers: roundPage(bs) * o.iodepth}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: login to %s at %s: %v\n", target, portal, err)
		return exitFailed
	}
	defer dev.Close()
	defer s.Close()
	blocks, lbs, err := remote.ReadCapacity(ctx, s, uint16(o.lun))
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator: LUN %d: %v\n", o.lun, err)
		return exitFailed
	}
	region := int64(blocks) * int64(lbs)
	if o.size > 0 {
		if int64(o.size) > region {
			fmt.Fprintf(stderr, "ddpinitiator bench: --size %v is larger than LUN %d (%s)\n", o.size, o.lun, human(region))
			return exitUsage
		}
		region = int64(o.size)
	}
	if bs%int(lbs) != 0 || int64(bs) > region {
		fmt.Fprintf(stderr, "ddpinitiator bench: --bs %v must be a multiple of the LUN's %d-octet blocks and fit in %s\n", o.bs, lbs, human(region))
		return exitUsage
	}
	b := &benchRun{s: s, o: o, bs: bs, lbs: int(lbs), n: region / int64(bs)}
	if b.n < int64(o.iodepth) && o.verify {
		fmt.Fprintf(stderr, "ddpinitiator bench: --verify needs at least --iodepth blocks of --bs in the region\n")
		return exitUsage
	}
	res, err := b.run(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator bench: %v\n", err)
		return exitFailed
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		res.print(stdout)
	}
	if res.VerifyErrors > 0 {
		return exitVerify
	}
	return exitOK
}

func (o *benchOpts) check() error {
	switch o.rw {
	case "read", "write", "randread", "randwrite", "randrw":
	default:
		return fmt.Errorf("--rw %q: use read, write, randread, randwrite or randrw", o.rw)
	}
	switch {
	case o.bs < 512 || o.bs > 16*config.MiB || o.bs%512 != 0:
		return fmt.Errorf("--bs %v: use 512 to 16MiB, a multiple of 512", o.bs)
	case o.iodepth < 1 || o.iodepth > 1024:
		return fmt.Errorf("--iodepth %d: use 1 to 1024", o.iodepth)
	case o.runtime <= 0:
		return fmt.Errorf("--runtime %v: must be positive", o.runtime)
	case o.progress != "auto" && o.progress != "always" && o.progress != "never":
		return fmt.Errorf("--progress %q: use auto, always or never", o.progress)
	}
	return nil
}

func roundPage(n int) int { return (n + 4095) &^ 4095 }

// benchRun is one bench invocation.
type benchRun struct {
	s   *initiator.Session
	o   benchOpts
	bs  int
	lbs int
	n   int64 // I/O-sized blocks in the region

	ios, bytes   atomic.Int64
	verifyErrors atomic.Int64
	firstBad     atomic.Pointer[string]
}

// Result is bench's summary.
type Result struct {
	RW           string  `json:"rw"`
	BlockSize    int     `json:"bs"`
	IODepth      int     `json:"iodepth"`
	Seconds      float64 `json:"runtime_s"`
	IOs          int64   `json:"ios"`
	IOPS         float64 `json:"iops"`
	MBps         float64 `json:"mb_per_s"`
	LatMeanUs    float64 `json:"lat_mean_us"`
	LatP50Us     float64 `json:"lat_p50_us"`
	LatP99Us     float64 `json:"lat_p99_us"`
	LatP999Us    float64 `json:"lat_p99_9_us"`
	LatMaxUs     float64 `json:"lat_max_us"`
	Verified     bool    `json:"verified"`
	VerifyErrors int64   `json:"verify_errors"`
	FirstError   string  `json:"first_error,omitempty"`
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "%s bs=%d iodepth=%d: %d I/Os in %.1f s\n", r.RW, r.BlockSize, r.IODepth, r.IOs, r.Seconds)
	fmt.Fprintf(w, "  IOPS %.0f  bandwidth %.1f MB/s\n", r.IOPS, r.MBps)
	fmt.Fprintf(w, "  latency (us): mean %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", r.LatMeanUs, r.LatP50Us, r.LatP99Us, r.LatP999Us, r.LatMaxUs)
	if r.Verified {
		fmt.Fprintf(w, "  verify: %d errors\n", r.VerifyErrors)
		if r.FirstError != "" {
			fmt.Fprintf(w, "  first: %s\n", r.FirstError)
		}
	}
}

func (b *benchRun) run(ctx context.Context, stderr io.Writer) (*Result, error) {
	random := b.o.rw == "randread" || b.o.rw == "randwrite" || b.o.rw == "randrw"
	reads := b.o.rw == "read" || b.o.rw == "randread"
	if b.o.verify && reads {
		if err := b.fill(ctx); err != nil {
			return nil, fmt.Errorf("filling the region for --verify: %w", err)
		}
	}
	// Workers stop starting I/O at the deadline and let what is in flight
	// complete; ctx (a signal) aborts at once.
	deadline := time.Now().Add(b.o.runtime)
	stop := b.startProgress(stderr)
	var wg sync.WaitGroup
	hists := make([]histogram, b.o.iodepth)
	errs := make(chan error, b.o.iodepth)
	start := time.Now()
	for w := 0; w < b.o.iodepth; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- b.worker(ctx, deadline, w, random, &hists[w])
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
	}
	var h histogram
	for i := range hists {
		h.merge(&hists[i])
	}
	ios := b.ios.Load()
	r := &Result{RW: b.o.rw, BlockSize: b.bs, IODepth: b.o.iodepth, Seconds: elapsed.Seconds(), IOs: ios,
		IOPS: float64(ios) / elapsed.Seconds(), MBps: float64(b.bytes.Load()) / elapsed.Seconds() / 1e6,
		LatMeanUs: h.mean() / 1e3, LatP50Us: h.quantile(0.5) / 1e3, LatP99Us: h.quantile(0.99) / 1e3,
		LatP999Us: h.quantile(0.999) / 1e3, LatMaxUs: float64(h.max) / 1e3,
		Verified: b.o.verify, VerifyErrors: b.verifyErrors.Load()}
	if p := b.firstBad.Load(); p != nil {
		r.FirstError = *p
	}
	return r, nil
}

// worker w owns the blocks k with k % iodepth == w (for --verify) and
// keeps one I/O in flight until ctx ends.
func (b *benchRun) worker(ctx context.Context, deadline time.Time, w int, random bool, h *histogram) error {
	buf, err := b.s.Alloc(b.bs)
	if err != nil {
		return err
	}
	defer b.s.Free(buf)
	rng := rand.New(rand.NewSource(int64(w) + 1))
	owned := (b.n - int64(w) + int64(b.o.iodepth) - 1) / int64(b.o.iodepth)
	gen := make([]uint32, owned) // generation last written per owned block (verify)
	if b.o.verify && (b.o.rw == "read" || b.o.rw == "randread") {
		for i := range gen {
			gen[i] = 1 // the fill pass
		}
	}
	cdb := make([]byte, 16)
	cmd := &initiator.Command{LUN: uint16(b.o.lun), CDB: cdb, Data: buf}
	var seq int64
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var i int64 // index among owned blocks
		if random {
			i = rng.Int63n(owned)
		} else {
			i = seq % owned
			seq++
		}
		blk := i*int64(b.o.iodepth) + int64(w)
		lba := uint64(blk) * uint64(b.bs/b.lbs)
		write := b.o.rw == "write" || b.o.rw == "randwrite" || (b.o.rw == "randrw" && rng.Intn(2) == 0)
		if write {
			cdb[0], cmd.Dir = 0x8a, initiator.DataOut
			if b.o.verify {
				gen[i]++
				stamp(buf, lba, gen[i])
			}
		} else {
			cdb[0], cmd.Dir = 0x88, initiator.DataIn
		}
		binary.BigEndian.PutUint64(cdb[2:], lba)
		binary.BigEndian.PutUint32(cdb[10:], uint32(b.bs/b.lbs))
		t0 := time.Now()
		if err := b.s.Do(ctx, cmd); err != nil {
			return err
		}
		h.add(time.Since(t0))
		if cmd.Status != 0 {
			return &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
		}
		if !write && b.o.verify && gen[i] > 0 {
			if msg := check(buf, lba, gen[i]); msg != "" {
				if b.verifyErrors.Add(1) == 1 {
					b.firstBad.Store(&msg)
				}
			}
		}
		b.ios.Add(1)
		b.bytes.Add(int64(b.bs))
	}
	return nil
}

// fill writes generation 1 of every block of the region (for --verify of
// read modes), iodepth writes in flight.
func (b *benchRun) fill(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, b.o.iodepth)
	for w := 0; w < b.o.iodepth; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf, err := b.s.Alloc(b.bs)
			if err != nil {
				errs <- err
				return
			}
			defer b.s.Free(buf)
			cdb := make([]byte, 16)
			cmd := &initiator.Command{LUN: uint16(b.o.lun), CDB: cdb, Dir: initiator.DataOut, Data: buf}
			cdb[0] = 0x8a
			for blk := int64(w); blk < b.n; blk += int64(b.o.iodepth) {
				lba := uint64(blk) * uint64(b.bs/b.lbs)
				stamp(buf, lba, 1)
				binary.BigEndian.PutUint64(cdb[2:], lba)
				binary.BigEndian.PutUint32(cdb[10:], uint32(b.bs/b.lbs))
				if err := remote.Run(ctx, b.s, cmd); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// stamp fills buf with the pattern of (lba, gen): every 8 octets hold
// lba<<20 ^ gen<<4 ^ their index, so a block from the wrong place, the
// wrong generation or shifted in any way is caught.
func stamp(buf []byte, lba uint64, gen uint32) {
	base := lba<<20 ^ uint64(gen)<<4
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], base^uint64(i>>3))
	}
}

// check compares buf with stamp's pattern and describes the first
// difference, or returns "".
func check(buf []byte, lba uint64, gen uint32) string {
	base := lba<<20 ^ uint64(gen)<<4
	for i := 0; i+8 <= len(buf); i += 8 {
		if got, want := binary.LittleEndian.Uint64(buf[i:]), base^uint64(i>>3); got != want {
			return fmt.Sprintf("LBA %d generation %d: octet %d reads %#016x, want %#016x", lba, gen, i, got, want)
		}
	}
	return ""
}

// startProgress prints IOPS and MB/s of the last second on stderr once a
// second, when asked to or when stderr is a terminal.
func (b *benchRun) startProgress(stderr io.Writer) (stop func()) {
	on := b.o.progress == "always"
	if b.o.progress == "auto" {
		if f, ok := stderr.(*os.File); ok {
			_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
			on = err == nil
		}
	}
	if !on {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastIOs, lastBytes int64
		start := time.Now()
		for {
			select {
			case <-done:
				fmt.Fprint(stderr, "\r\033[K")
				return
			case now := <-t.C:
				ios, by := b.ios.Load(), b.bytes.Load()
				fmt.Fprintf(stderr, "\r\033[K[%3.0fs] %s: %8.0f IOPS %9.1f MB/s", now.Sub(start).Seconds(), b.o.rw,
					float64(ios-lastIOs), float64(by-lastBytes)/1e6)
				if b.o.verify {
					fmt.Fprintf(stderr, "  verify errors %d", b.verifyErrors.Load())
				}
				lastIOs, lastBytes = ios, by
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// histogram records latencies in log-linear buckets: 16 per power of two
// (about 6% resolution), no allocation per sample.
type histogram struct {
	counts [64 * 16]int64
	n      int64
	sum    float64
	max    int64
}

func bucketOf(v int64) int {
	if v < 16 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 5 // v >> e is in [16, 32)
	return (e+1)*16 + int(v>>e) - 16
}

func lowerOf(i int) float64 {
	if i < 16 {
		return float64(i)
	}
	e := i/16 - 1
	return float64(int64(i%16+16) << e)
}

func (h *histogram) add(d time.Duration) {
	v := int64(d)
	h.counts[min(bucketOf(v), len(h.counts)-1)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the lower bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return lowerOf(i)
		}
	}
	return float64(h.max)
}
