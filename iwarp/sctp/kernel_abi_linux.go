//go:build linux

package sctp

// The Linux SCTP socket API (RFC 6458) that golang.org/x/sys/unix lacks,
// from include/uapi/linux/sctp.h (Linux 6.1) unless said otherwise.

// Option level: SOL_SCTP (include/linux/socket.h) is IPPROTO_SCTP.
const solSCTP = 132

// Socket options (getsockopt/setsockopt at solSCTP).
const (
	sctpINITMSG          = 2   // SCTP_INITMSG: struct sctp_initmsg
	sctpNODELAY          = 3   // SCTP_NODELAY: int
	sctpADAPTATIONLAYER  = 7   // SCTP_ADAPTATION_LAYER: struct sctp_setadaptation
	sctpDISABLEFRAGMENTS = 8   // SCTP_DISABLE_FRAGMENTS: int
	sctpSTATUS           = 14  // SCTP_STATUS: struct sctp_status
	sctpDELAYEDSACK      = 16  // SCTP_DELAYED_SACK: struct sctp_sack_info
	sctpRECVRCVINFO      = 32  // SCTP_RECVRCVINFO: int
	sctpEVENT            = 127 // SCTP_EVENT: struct sctp_event
)

// Ancillary data types (enum sctp_cmsg_type) at level solSCTP.
const (
	sctpCmsgSNDINFO = 2 // SCTP_SNDINFO: struct sctp_sndinfo
	sctpCmsgRCVINFO = 3 // SCTP_RCVINFO: struct sctp_rcvinfo
)

// snd_flags and rcv_flags (enum sctp_sinfo_flags).
const sctpUNORDERED = 1 << 0 // SCTP_UNORDERED

// msgNOTIFICATION is recvmsg's msg_flags bit of a notification
// (MSG_NOTIFICATION).
const msgNOTIFICATION = 0x8000

// Notification types (enum sctp_sn_type) and the states of
// SCTP_ASSOC_CHANGE (enum sctp_sac_state).
const (
	sctpASSOCCHANGE          = 0x8001 // SCTP_ASSOC_CHANGE
	sctpADAPTATIONINDICATION = 0x8007 // SCTP_ADAPTATION_INDICATION
	sctpSENDERDRYEVENT       = 0x8009 // SCTP_SENDER_DRY_EVENT
	sctpCOMMUP               = 0      // SCTP_COMM_UP
	sctpCOMMLOST             = 1      // SCTP_COMM_LOST
	sctpSHUTDOWNCOMP         = 3      // SCTP_SHUTDOWN_COMP
	sctpCANTSTRASSOC         = 4      // SCTP_CANT_STR_ASSOC
)

// Sizes and offsets of the structures used.
const (
	notificationHeaderLen = 8   // struct sctp_tlv: sn_type, sn_flags, sn_length
	assocChangeLen        = 20  // struct sctp_assoc_change without sac_info
	adaptationEventLen    = 16  // struct sctp_adaptation_event
	sctpStatusLen         = 176 // struct sctp_status (sctp_paddrinfo is packed, aligned(4))
	sctpSndinfoLen        = 16  // struct sctp_sndinfo
	sctpRcvinfoLen        = 28  // struct sctp_rcvinfo
	sctpEventLen          = 8   // struct sctp_event (4 + 2 + 1, padded)
	sctpInitmsgLen        = 8   // struct sctp_initmsg
	sctpSackInfoLen       = 12  // struct sctp_sack_info

	statusUnackdataOff = 12 // sstat_unackdata (u16)
	statusPenddataOff  = 14 // sstat_penddata (u16)
	statusInstrmsOff   = 16 // sstat_instrms (u16)
	statusOutstrmsOff  = 18 // sstat_outstrms (u16)
	statusFragPointOff = 20 // sstat_fragmentation_point (u32)
)
