package mem

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkRegisterDeregister measures one registration and deregistration,
// grace period included, with idle readers and with readers that are always
// busy in short critical sections (a loaded engine).
func BenchmarkRegisterDeregister(b *testing.B) {
	for _, busy := range []int{0, 1, 4} {
		b.Run(map[int]string{0: "idle", 1: "1busy", 4: "4busy"}[busy], func(b *testing.B) {
			tab := NewTable(0)
			m := anon(b, pageSize)
			pd := NewPD()
			held := register(b, tab, pd, m, 0, 64, LocalWrite, ZeroBased)
			var stop atomic.Bool
			var wg sync.WaitGroup
			for range busy {
				r := tab.NewReader()
				wg.Go(func() {
					defer r.Close()
					for !stop.Load() {
						r.Enter()
						for range 16 {
							r.Check(held.STag(), pd, 0, 1, 0) // another region
						}
						r.Exit()
					}
				})
			}
			b.ReportAllocs()
			for b.Loop() {
				mr, err := tab.Register(pd, m, 0, 64, LocalWrite, ZeroBased)
				if err != nil {
					b.Fatal(err)
				}
				if err := tab.Deregister(context.Background(), mr); err != nil {
					b.Fatal(err)
				}
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}
