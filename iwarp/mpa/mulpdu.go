package mpa

// MinMULPDU is the floor below which MPA never shrinks the MULPDU, so that DDP
// always has room for a header and some payload (RFC 5044 section 4.5).
const MinMULPDU = 128

// MULPDU returns the Maximum ULPDU for an effective maximum segment size of
// emss octets, by the two formulas of RFC 5044 section 4.5:
//
//	with Markers:    MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4)
//	without Markers: MULPDU = EMSS - (6 + EMSS mod 4)
//
// The result is never below MinMULPDU, and never above what ULPDU_Length can
// express.
func MULPDU(emss int, markers bool) int {
	m := emss - (Overhead + emss%4)
	if markers {
		m -= MarkerSize * ((emss + MarkerInterval - 1) / MarkerInterval)
	}
	switch {
	case m < MinMULPDU:
		return MinMULPDU
	case m > MaxULPDU:
		return MaxULPDU
	}
	return m
}
