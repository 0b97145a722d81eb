package mem

import "unsafe"

// ntStore copies n octets, a multiple of 64, from src to dst, which is
// 16-octet aligned, with non-temporal stores, then SFENCE.
//
//go:noescape
func ntStore(dst, src *byte, n uintptr)

// copyNT copies len(dst) == len(src) octets: the head up to dst's first
// 16-octet boundary and the tail by copy, the body by ntStore.
func copyNT(dst, src []byte) {
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 15)
	body := (len(dst) - head) &^ 63
	copy(dst[:head], src[:head])
	ntStore(&dst[head], &src[head], uintptr(body))
	copy(dst[head+body:], src[head+body:])
}
