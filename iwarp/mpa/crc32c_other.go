//go:build !amd64

package mpa

const haveFold, haveFoldAVX2 = false, false

func fold(reg uint32, p []byte) uint32 { panic("mpa: no folding CRC32c on this CPU") }

func foldSqueeze(reg uint32, src []byte, dst *byte, fpduptr uint16) (uint32, bool) {
	panic("mpa: no folding CRC32c on this CPU")
}

func foldSpread(reg uint32, p []byte, fpduptr uint16, dst *byte) uint32 {
	panic("mpa: no folding CRC32c on this CPU")
}

func foldAVX2(reg uint32, p, s []byte, crcs *[3]uint32) uint32 {
	panic("mpa: no folding CRC32c on this CPU")
}
