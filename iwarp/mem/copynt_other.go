//go:build !amd64

package mem

func copyNT(dst, src []byte) { copy(dst, src) }
