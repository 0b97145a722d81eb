package iscsi

import "encoding/binary"

// InitiatorSNs are the sequence numbers every initiator PDU carries at
// the same place (section 11.2.1 and each PDU's layout): CmdSN in octets
// 24-27 and ExpStatSN in octets 28-31. The views of initiator PDUs embed it.
type InitiatorSNs struct{ BHS }

// CmdSN is the command sequence number (octets 24-27).
func (p InitiatorSNs) CmdSN() uint32 { return binary.BigEndian.Uint32(p.BHS[24:]) }

// SetCmdSN sets octets 24-27.
func (p InitiatorSNs) SetCmdSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[24:], v) }

// ExpStatSN is the next StatSN the initiator expects (octets 28-31).
func (p InitiatorSNs) ExpStatSN() uint32 { return binary.BigEndian.Uint32(p.BHS[28:]) }

// SetExpStatSN sets octets 28-31.
func (p InitiatorSNs) SetExpStatSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[28:], v) }

// TargetSNs are the sequence numbers every target PDU that answers
// carries at the same place: StatSN in octets 24-27, ExpCmdSN in 28-31 and
// MaxCmdSN in 32-35 (section 4.2.2.1 on the command window). The views of
// target PDUs embed it.
type TargetSNs struct{ BHS }

// StatSN is the status sequence number (octets 24-27).
func (p TargetSNs) StatSN() uint32 { return binary.BigEndian.Uint32(p.BHS[24:]) }

// SetStatSN sets octets 24-27.
func (p TargetSNs) SetStatSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[24:], v) }

// ExpCmdSN is the next CmdSN the target expects (octets 28-31).
func (p TargetSNs) ExpCmdSN() uint32 { return binary.BigEndian.Uint32(p.BHS[28:]) }

// SetExpCmdSN sets octets 28-31.
func (p TargetSNs) SetExpCmdSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[28:], v) }

// MaxCmdSN is the highest CmdSN the target accepts now (octets 32-35).
func (p TargetSNs) MaxCmdSN() uint32 { return binary.BigEndian.Uint32(p.BHS[32:]) }

// SetMaxCmdSN sets octets 32-35.
func (p TargetSNs) SetMaxCmdSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[32:], v) }
