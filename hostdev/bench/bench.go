// Package bench drives I/O against one LUN of an initiator session in this
// process (no FUSE, no kernel block layer) and measures IOPS, bandwidth and
// latency: the engine of "ddpinitiator bench".
//
// With Verify every written block carries its LBA and a generation number,
// and every read of a block written in the run is checked (read modes first
// fill the region). Workers own disjoint blocks, so the check is exact.
package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"golang.org/x/sys/unix"
)

// Options are a run's settings. Their errors name them by the flags of
// "ddpinitiator bench".
type Options struct {
	LUN       int
	RW        string      // read, write, randread, randwrite or randrw (half reads)
	BlockSize config.Size // of each I/O: 512 to 16MiB, a multiple of 512
	IODepth   int         // I/Os in flight: 1 to 1024
	Runtime   time.Duration
	Size      config.Size // the part of the LUN to use, from LBA 0; 0 for all of it
	Verify    bool
	Progress  string // a progress line once a second: auto (on a terminal), always, never
	// Stalls measures how late the process's goroutines run (a goroutine
	// waking every millisecond), to tell a long I/O spent in this process
	// from one spent at the target; it costs a wake-up a millisecond.
	Stalls bool
}

// Check validates the options that do not depend on the LUN.
func (o *Options) Check() error {
	switch o.RW {
	case "read", "write", "randread", "randwrite", "randrw":
	default:
		return fmt.Errorf("--rw %q: use read, write, randread, randwrite or randrw", o.RW)
	}
	switch {
	case o.BlockSize < 512 || o.BlockSize > 16*config.MiB || o.BlockSize%512 != 0:
		return fmt.Errorf("--bs %v: use 512 to 16MiB, a multiple of 512", o.BlockSize)
	case o.IODepth < 1 || o.IODepth > 1024:
		return fmt.Errorf("--iodepth %d: use 1 to 1024", o.IODepth)
	case o.Runtime <= 0:
		return fmt.Errorf("--runtime %v: must be positive", o.Runtime)
	case o.Progress != "auto" && o.Progress != "always" && o.Progress != "never":
		return fmt.Errorf("--progress %q: use auto, always or never", o.Progress)
	}
	return nil
}

// Buffers is the registered memory a session needs for a run: a
// page-rounded buffer per I/O in flight.
func (o *Options) Buffers() int { return roundPage(int(o.BlockSize)) * o.IODepth }

func roundPage(n int) int { return (n + 4095) &^ 4095 }

// A UsageError says that the options do not fit the LUN.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Run is one prepared run.
type Run struct {
	s   *initiator.Session
	o   Options
	bs  int
	lbs int
	n   int64 // I/O-sized blocks in the region

	ios, bytes   atomic.Int64
	verifyErrors atomic.Int64
	firstBad     atomic.Pointer[string]
}

// New reads the capacity of o.LUN and checks that o fits it: a
// *UsageError when it does not. o must have passed Check.
func New(ctx context.Context, s *initiator.Session, o Options) (*Run, error) {
	blocks, lbs, err := remote.ReadCapacity(ctx, s, uint16(o.LUN))
	if err != nil {
		return nil, fmt.Errorf("LUN %d: %w", o.LUN, err)
	}
	region := int64(blocks) * int64(lbs)
	if o.Size > 0 {
		if int64(o.Size) > region {
			return nil, usageErrorf("--size %v is larger than LUN %d (%s)", o.Size, o.LUN, hostdev.HumanSize(region))
		}
		region = int64(o.Size)
	}
	bs := int(o.BlockSize)
	if bs%int(lbs) != 0 || int64(bs) > region {
		return nil, usageErrorf("--bs %v must be a multiple of the LUN's %d-octet blocks and fit in %s", o.BlockSize, lbs, hostdev.HumanSize(region))
	}
	b := &Run{s: s, o: o, bs: bs, lbs: int(lbs), n: region / int64(bs)}
	if b.n < int64(o.IODepth) && o.Verify {
		return nil, usageErrorf("--verify needs at least --iodepth blocks of --bs in the region")
	}
	return b, nil
}

// Run drives I/O for o.Runtime and summarizes it; a progress line goes to
// progress when o.Progress asks for it. Workers stop starting I/O at the
// deadline and let what is in flight complete; ctx's end aborts at once
// and is not an error.
func (b *Run) Run(ctx context.Context, progress io.Writer) (*Result, error) {
	random := b.o.RW == "randread" || b.o.RW == "randwrite" || b.o.RW == "randrw"
	reads := b.o.RW == "read" || b.o.RW == "randread"
	if b.o.Verify && reads {
		if err := b.fill(ctx); err != nil {
			return nil, fmt.Errorf("filling the region for --verify: %w", err)
		}
	}
	deadline := time.Now().Add(b.o.Runtime)
	stop := b.startProgress(progress)
	var wg sync.WaitGroup
	hists := make([]Histogram, b.o.IODepth)
	errs := make(chan error, b.o.IODepth)
	var stalls *stallMeter
	if b.o.Stalls {
		stalls = startStallMeter()
	}
	gc0 := readGC()
	start := time.Now()
	for w := 0; w < b.o.IODepth; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- b.worker(ctx, deadline, w, random, &hists[w])
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	gcCycles, gcPause := readGC().since(gc0)
	var stall time.Duration
	if stalls != nil {
		stall = stalls.end()
	}
	stop()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
	}
	var h Histogram
	for i := range hists {
		h.Merge(&hists[i])
	}
	r := summarize(b.o, b.bs, elapsed, b.ios.Load(), b.bytes.Load(), &h)
	r.GCCycles, r.GCPauseMaxUs, r.StallMaxUs = gcCycles, float64(gcPause)/1e3, float64(stall)/1e3
	r.VerifyErrors = b.verifyErrors.Load()
	if p := b.firstBad.Load(); p != nil {
		r.FirstError = *p
	}
	return r, nil
}

// worker w owns the blocks k with k % iodepth == w (for Verify) and keeps
// one I/O in flight until the deadline or ctx's end.
func (b *Run) worker(ctx context.Context, deadline time.Time, w int, random bool, h *Histogram) error {
	buf, err := b.s.Alloc(b.bs)
	if err != nil {
		return err
	}
	defer b.s.Free(buf)
	rng := rand.New(rand.NewSource(int64(w) + 1))
	owned := (b.n - int64(w) + int64(b.o.IODepth) - 1) / int64(b.o.IODepth)
	gen := make([]uint32, owned) // generation last written per owned block (verify)
	if b.o.Verify && (b.o.RW == "read" || b.o.RW == "randread") {
		for i := range gen {
			gen[i] = 1 // the fill pass
		}
	}
	cdb := make([]byte, 16)
	cmd := &initiator.Command{LUN: uint16(b.o.LUN), CDB: cdb, Data: buf}
	var seq int64
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var i int64 // index among owned blocks
		if random {
			i = rng.Int63n(owned)
		} else {
			i = seq % owned
			seq++
		}
		blk := i*int64(b.o.IODepth) + int64(w)
		lba := uint64(blk) * uint64(b.bs/b.lbs)
		write := b.o.RW == "write" || b.o.RW == "randwrite" || (b.o.RW == "randrw" && rng.Intn(2) == 0)
		if write {
			cdb[0], cmd.Dir = 0x8a, initiator.DataOut
			if b.o.Verify {
				gen[i]++
				Stamp(buf, lba, gen[i])
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
		h.Add(time.Since(t0))
		if cmd.Status != 0 {
			return &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
		}
		if !write && b.o.Verify && gen[i] > 0 {
			if msg := Check(buf, lba, gen[i]); msg != "" {
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

// fill writes generation 1 of every block of the region (for Verify of
// read modes), iodepth writes in flight.
func (b *Run) fill(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, b.o.IODepth)
	for w := 0; w < b.o.IODepth; w++ {
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
			cmd := &initiator.Command{LUN: uint16(b.o.LUN), CDB: cdb, Dir: initiator.DataOut, Data: buf}
			cdb[0] = 0x8a
			for blk := int64(w); blk < b.n; blk += int64(b.o.IODepth) {
				lba := uint64(blk) * uint64(b.bs/b.lbs)
				Stamp(buf, lba, 1)
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

// startProgress prints IOPS and MB/s of the last second on w once a
// second, when asked to or when w is a terminal.
func (b *Run) startProgress(w io.Writer) (stop func()) {
	on := b.o.Progress == "always"
	if b.o.Progress == "auto" {
		if f, ok := w.(*os.File); ok {
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
				fmt.Fprint(w, "\r\033[K")
				return
			case now := <-t.C:
				ios, by := b.ios.Load(), b.bytes.Load()
				fmt.Fprintf(w, "\r\033[K[%3.0fs] %s: %8.0f IOPS %9.1f MB/s", now.Sub(start).Seconds(), b.o.RW,
					float64(ios-lastIOs), float64(by-lastBytes)/1e6)
				if b.o.Verify {
					fmt.Fprintf(w, "  verify errors %d", b.verifyErrors.Load())
				}
				lastIOs, lastBytes = ios, by
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Stamp fills buf with the pattern of (lba, gen): every 8 octets hold
// lba<<20 ^ gen<<4 ^ their index, so a block from the wrong place, the
// wrong generation or shifted in any way is caught.
func Stamp(buf []byte, lba uint64, gen uint32) {
	base := lba<<20 ^ uint64(gen)<<4
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], base^uint64(i>>3))
	}
}

// Check compares buf with Stamp's pattern and describes the first
// difference, or returns "".
func Check(buf []byte, lba uint64, gen uint32) string {
	base := lba<<20 ^ uint64(gen)<<4
	for i := 0; i+8 <= len(buf); i += 8 {
		if got, want := binary.LittleEndian.Uint64(buf[i:]), base^uint64(i>>3); got != want {
			return fmt.Sprintf("LBA %d generation %d: octet %d reads %#016x, want %#016x", lba, gen, i, got, want)
		}
	}
	return ""
}
