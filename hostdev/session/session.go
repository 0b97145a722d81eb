// Package session logs an initiator host in to a target as its
// configuration (config.Initiator) says: the session settings, the CHAP
// secrets and the lower layer that apply to a target or to discovery.
package session

import (
	"context"
	"slices"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/login"
)

// Config completes cfg for a session with target ("" for discovery) from
// conf: the names, the queue depth and buffers where cfg leaves them
// zero, MPA, NOP, the recovery timeout, the CHAP secrets, the digests, and
// the target's configured portals as the alternates to fail over to. chap, when
// not nil, replaces the configured CHAP (a command line's).
func Config(conf *config.Initiator, target string, cfg initiator.Config, chap *config.CHAP) initiator.Config {
	cfg.InitiatorName, cfg.TargetName = conf.InitiatorName, target
	if cfg.QueueDepth == 0 {
		cfg.QueueDepth = conf.QueueDepth
	}
	if cfg.Buffers == 0 {
		cfg.Buffers = int(conf.Buffers)
	}
	cfg.Conn.MPA = mpa.StartupConfig{Revision: uint8(conf.MPA.Revision), Markers: conf.MPA.Markers, NoCRC: !conf.MPA.CRC}
	cfg.NopInterval, cfg.NopTimeout = conf.NOP.Interval, conf.NOP.Timeout
	if conf.NOP.Interval == 0 {
		cfg.NopInterval = -1
	}
	if target != "" {
		cfg.RecoveryTimeout = conf.RecoveryTimeout
		if t, err := conf.FindTarget(target); err == nil {
			if t.CHAP != nil {
				cfg.CHAP = loginCHAP(t.CHAP)
			}
			cfg.HeaderDigest, cfg.DataDigest = t.HeaderDigest, t.DataDigest
			// The target's other portals (gateways) to fail over to, or
			// to spread the commands over.
			cfg.Alternates, cfg.RoundRobin = t.Portals, t.RoundRobin
		}
	} else if conf.DiscoveryCHAP != nil {
		cfg.CHAP = loginCHAP(conf.DiscoveryCHAP)
	}
	if chap != nil {
		cfg.CHAP = loginCHAP(chap)
	}
	return cfg
}

func loginCHAP(c *config.CHAP) *login.CHAP {
	return &login.CHAP{User: c.User, Secret: c.Secret, MutualUser: c.MutualUser, MutualSecret: c.MutualSecret}
}

// Network is the lower layer to reach portal by, as the iwarp network
// name: override, else the transport of the configured target (by name,
// or for discovery the one listing portal), else tcp.
func Network(conf *config.Initiator, portal, target, override string) string {
	if override != "" {
		return override
	}
	for _, t := range conf.Targets {
		if t.Name == target || target == "" && slices.Contains(t.Portals, portal) {
			if t.Transport != "" {
				return t.Transport
			}
			break
		}
	}
	return config.TransportTCP
}

// DialTimeout bounds connecting and logging in.
const DialTimeout = 20 * time.Second

// Dial logs in to portal over network on a new software RNIC; the caller
// closes the session, then the device.
func Dial(ctx context.Context, network, portal string, cfg initiator.Config) (*initiator.Session, *iwarp.Device, error) {
	if !slices.Contains(cfg.Alternates, portal) {
		// The configured portals are failover paths only for a session to
		// one of them, not for a portal given on the command line.
		cfg.Alternates = nil
	}
	dev := iwarp.NewDevice(0)
	if cfg.Conn.ReadSpin == 0 {
		cfg.Conn.ReadSpin = iwarp.DefaultReadSpin
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	s, err := initiator.Dial(dctx, dev, network, portal, cfg)
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	return s, dev, nil
}

// TargetLUNs are the LUNs of target that conf selects (its luns), or nil
// for every one the target reports, also when conf does not name target.
func TargetLUNs(conf *config.Initiator, target string) []uint16 {
	t, err := conf.FindTarget(target)
	if err != nil {
		return nil
	}
	var luns []uint16
	for _, n := range t.LUNs {
		luns = append(luns, uint16(n))
	}
	return luns
}
