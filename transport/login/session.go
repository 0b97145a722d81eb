package login

// Result is the outcome of a successful login.
type Result struct {
	// SessionType is "Normal" or "Discovery" (section 13.21).
	SessionType string
	// InitiatorName, InitiatorAlias and TargetName as declared (sections
	// 13.4, 13.5, 13.7); TargetName is empty in a Discovery session that
	// named none.
	InitiatorName, InitiatorAlias, TargetName string
	// TargetAlias is the alias the target declared (section 13.6).
	TargetAlias string
	// ISID is the 48-bit Initiator Session ID, TSIH the Target Session
	// Identifying Handle, CID the connection ID (sections 11.12.5 to
	// 11.12.7).
	ISID uint64
	TSIH uint16
	CID  uint16
	// TPGT is the Target Portal Group Tag (section 13.9).
	TPGT uint16
	// CmdSN is the CmdSN the first non-immediate command of the Full
	// Feature Phase carries (section 11.12.8): the target's ExpCmdSN.
	CmdSN uint32
	// StatSN is the next StatSN the target sends: the initiator's
	// ExpStatSN (section 11.13.4).
	StatSN uint32
	// MaxCmdSN is the MaxCmdSN of the Login Final-Response.
	MaxCmdSN uint32
	// Params are the negotiated parameters.
	Params Params
	// Policy is the policy of the target logged in to (target role, Normal
	// sessions only).
	Policy *TargetPolicy
}

// Session types (section 13.21).
const (
	SessionNormal    = "Normal"
	SessionDiscovery = "Discovery"
)

// Stage codes of CSG and NSG (section 11.12.3).
const (
	StageSecurity    = 0 // SecurityNegotiation
	StageOperational = 1 // LoginOperationalNegotiation
	StageFullFeature = 3 // FullFeaturePhase
)

type loginState uint8

const (
	stateStart loginState = iota
	stateLogin
	stateDone
	stateFailed
)

type authMethod uint8

const (
	authUnset authMethod = iota
	authNone
	authCHAP
)
