//go:build !amd64

package mpa

const haveFold = false

func fold(reg uint32, p []byte) uint32 { panic("mpa: no folding CRC32c on this CPU") }
