package transport_test

import (
	"context"
	"encoding/binary"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// BenchmarkISER drives target and initiator in one process over loopback
// against a memory LU: b.N commands of the given size, qd in flight.
func BenchmarkISER(b *testing.B) {
	for _, c := range []struct {
		name   string
		write  bool
		random bool
		size   int
		qd     int
	}{
		{"randread4KiB_qd1", false, true, 4 << 10, 1},
		{"randwrite4KiB_qd1", true, true, 4 << 10, 1},
		{"randread4KiB_qd32", false, true, 4 << 10, 32},
		{"seqread1MiB_qd8", false, false, 1 << 20, 8},
		{"randwrite4KiB_qd32", true, true, 4 << 10, 32},
		{"seqwrite1MiB_qd8", true, false, 1 << 20, 8},
	} {
		b.Run(c.name, func(b *testing.B) {
			const lunSize = 256 << 20
			r := newRig(b, rigOpts{sizes: []int64{lunSize}})
			s := r.dial(b, initiator.Config{TargetName: targetName, QueueDepth: c.qd, Buffers: c.qd * c.size})
			bufs := make([][]byte, c.qd)
			for i := range bufs {
				var err error
				if bufs[i], err = s.Alloc(c.size); err != nil {
					b.Fatal(err)
				}
			}
			blocks := uint64(lunSize / c.size)
			var next atomic.Int64
			var failed atomic.Pointer[error]
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < c.qd; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					rng := rand.New(rand.NewSource(int64(w)))
					cmd := &initiator.Command{Data: bufs[w], Dir: initiator.DataIn}
					cdb := read16(0, 0)
					if c.write {
						cmd.Dir, cdb = initiator.DataOut, write16(0, 0)
					}
					cmd.CDB = cdb
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						blk := uint64(i) % blocks
						if c.random {
							blk = uint64(rng.Int63n(int64(blocks)))
						}
						putLBA(cdb, blk*uint64(c.size/512), uint32(c.size/512))
						if err := s.Do(context.Background(), cmd); err != nil {
							e := err // a copy: &err would move every call's err to the heap
							failed.Store(&e)
							return
						}
						if cmd.Status != 0 {
							var e error = &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
							failed.Store(&e)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "IOPS")
		})
	}
}

// putLBA sets the LBA and transfer length of a READ(16) or WRITE(16) CDB.
func putLBA(cdb []byte, lba uint64, blocks uint32) {
	binary.BigEndian.PutUint64(cdb[2:], lba)
	binary.BigEndian.PutUint32(cdb[10:], blocks)
}
