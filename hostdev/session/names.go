package session

import (
	"fmt"
	"io"
	"net"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/transport/login"
)

// DefaultPort is the iSCSI port (RFC 7143, 13.4), which a portal given
// without one gets.
const DefaultPort = "3260"

// WithPort adds DefaultPort to a portal given without a port.
func WithPort(portal string) string {
	if _, _, err := net.SplitHostPort(portal); err == nil {
		return portal
	}
	return net.JoinHostPort(portal, DefaultPort)
}

// ConfiguredPortal is the portal to reach target at when none is given:
// the first one conf lists for it (for "" its only target).
func ConfiguredPortal(conf *config.Initiator, target string) (string, error) {
	t, err := conf.FindTarget(target)
	if err != nil {
		return "", fmt.Errorf("no PORTAL given and %v", err)
	}
	return t.Portals[0], nil
}

// TargetName is the target to log in to: name (a command line's), else
// conf's only target.
func TargetName(conf *config.Initiator, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	t, err := conf.FindTarget("")
	if err != nil {
		return "", err
	}
	return t.Name, nil
}

// PrintTargets lists the targets of a SendTargets response on w, as
// "ddpinitiator discover" prints them: each name on a line of its own,
// then its portals as "  ADDR,TPGT", one a line.
func PrintTargets(w io.Writer, ts []login.TargetInfo) {
	for _, t := range ts {
		fmt.Fprintln(w, t.Name)
		for _, p := range t.Portals {
			fmt.Fprintf(w, "  %s,%d\n", p.Addr, p.TPGT)
		}
	}
}
