package mem

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyNT: every alignment of destination and source, lengths around
// ntMin and the 64-octet body, against copy; nothing outside dst changes.
func TestCopyNT(t *testing.T) {
	src := make([]byte, 3*ntMin)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	buf := make([]byte, 4*ntMin)
	for _, n := range []int{0, 1, ntMin - 1, ntMin, ntMin + 1, ntMin + 63, ntMin + 64, 2*ntMin + 17, 3*ntMin - 40} {
		for dOff := 0; dOff < 33; dOff += 3 {
			for sOff := 0; sOff < 40; sOff += 13 {
				if sOff+n > len(src) {
					continue
				}
				for i := range buf {
					buf[i] = 0xa5
				}
				got := CopyNT(buf[dOff:dOff+n], src[sOff:])
				if got != n {
					t.Fatalf("n %d: CopyNT returned %d", n, got)
				}
				if !bytes.Equal(buf[dOff:dOff+n], src[sOff:sOff+n]) {
					t.Fatalf("n %d, dst +%d, src +%d: copied octets differ", n, dOff, sOff)
				}
				for i, b := range buf {
					if (i < dOff || i >= dOff+n) && b != 0xa5 {
						t.Fatalf("n %d, dst +%d, src +%d: octet %d outside dst written", n, dOff, sOff, i)
					}
				}
			}
		}
	}
	// Shorter dst than src, as copy.
	if got := CopyNT(buf[:ntMin+5], src); got != ntMin+5 || !bytes.Equal(buf[:ntMin+5], src[:ntMin+5]) {
		t.Fatalf("CopyNT into a shorter dst: %d", got)
	}
}

// BenchmarkCopyNT copies 64 KiB segments from a buffer in cache across a
// 256 MiB file on /dev/shm (a store's mapping, cold), with copy and with
// CopyNT.
func BenchmarkCopyNT(b *testing.B) {
	const size = 256 << 20
	path := filepath.Join("/dev/shm", "ddpstore-copynt-bench")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Skip(err)
	}
	defer os.Remove(path)
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		b.Skip(err)
	}
	dst, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		b.Skip(err)
	}
	defer unix.Munmap(dst)
	src := make([]byte, 64<<10)
	for _, c := range []struct {
		name string
		f    func(d, s []byte) int
	}{{"copy", func(d, s []byte) int { return copy(d, s) }}, {"CopyNT", CopyNT}} {
		f := c.f
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			off := 0
			for b.Loop() {
				f(dst[off+8:], src) // not 16-aligned: the head and tail too
				if off += len(src); off+len(src)+8 > size {
					off = 0
				}
			}
		})
	}
}

// TestCopyNTFault: a fault in the non-temporal body (a file mapping whose
// file was cut under it) is a recoverable panic under SetPanicOnFault, as
// copy's is: the placements that use CopyNT turn it into an error.
func TestCopyNTFault(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "cut")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 4 * ntMin
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	faulted := func() (faulted bool) {
		defer func() {
			if r := recover(); r != nil {
				_, faulted = r.(interface{ Addr() uintptr })
			}
		}()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		CopyNT(m[16:], make([]byte, 2*ntMin))
		return false
	}()
	if !faulted {
		t.Fatal("CopyNT into a mapping past its file's end did not fault recoverably")
	}
}
