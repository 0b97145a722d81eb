package mem

// ntMin is the shortest copy CopyNT makes with non-temporal stores: below
// it the head and tail cost more than the body saves.
const ntMin = 4096

// CopyNT copies src into dst as copy does and returns the octets copied;
// dst and src must not overlap. On amd64 it writes the 16-octet-aligned
// body with non-temporal stores (MOVNTDQ), which write the destination's
// cache lines without reading them first: for data written into memory
// that is not read again soon (a store's mapping) it moves 64 KiB from a
// buffer in cache into tmpfs pages about 2.2x faster than copy on this
// project's VM (BenchmarkCopyNT). The stores are fenced (SFENCE) before it
// returns, so they are ordered before any later store, as copy's are.
// Short copies, and other architectures, use copy.
func CopyNT(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < ntMin {
		return copy(dst, src)
	}
	copyNT(dst[:n], src[:n])
	return n
}
