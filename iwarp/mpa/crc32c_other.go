//go:build !amd64

package mpa

const haveFold = false

func fold(reg uint32, p []byte) uint32 { panic("mpa: no folding CRC32c on this CPU") }

func foldMarked(reg uint32, p, marks []byte) uint32 {
	panic("mpa: no folding CRC32c on this CPU")
}
