package config

import (
	"bytes"
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Marshal writes t as YAML with every field spelled out, defaults included:
// the effective configuration, as ddptarget --check prints it. For a Target
// that ParseTarget returned, ParseTarget(Marshal()) yields an equal Target.
// Marshal does not check t: a Target built by hand with invalid values
// produces YAML that ParseTarget rejects. The output holds the CHAP secrets.
func (t *Target) Marshal() ([]byte, error) {
	root := mapNode(false)
	portals := seqNode()
	for _, p := range t.Portals {
		pm := mapNode(false)
		add(pm, "listen", strNode(p.Listen))
		add(pm, "transport", strNode(p.Transport))
		if p.Transport == TransportTCP {
			mm := mapNode(true)
			add(mm, "revision", intNode(p.MPA.Revision))
			add(mm, "markers", boolNode(p.MPA.Markers))
			add(mm, "crc", boolNode(p.MPA.CRC))
			add(pm, "mpa", mm)
		}
		portals.Content = append(portals.Content, pm)
	}
	add(root, "portals", portals)
	targets := seqNode()
	for _, td := range t.Targets {
		tm := mapNode(false)
		add(tm, "name", strNode(td.Name))
		if td.Alias != "" {
			add(tm, "alias", strNode(td.Alias))
		}
		luns := seqNode()
		for _, l := range td.LUNs {
			lm := mapNode(true)
			add(lm, "id", intNode(l.ID))
			if l.Path != "" {
				add(lm, "path", strNode(l.Path))
			}
			if l.Memory != 0 {
				add(lm, "memory", strNode(l.Memory.String()))
			}
			if r := l.RBD; r.Image != "" {
				rm := mapNode(true)
				add(rm, "pool", strNode(r.Pool))
				add(rm, "image", strNode(r.Image))
				add(rm, "conf", strNode(r.Conf))
				add(rm, "user", strNode(r.User))
				if r.Keyring != "" {
					add(rm, "keyring", strNode(r.Keyring))
				}
				add(lm, "rbd", rm)
			}
			if l.Size != 0 {
				add(lm, "size", strNode(l.Size.String()))
			}
			if l.ReadOnly {
				add(lm, "readonly", boolNode(true))
			}
			luns.Content = append(luns.Content, lm)
		}
		add(tm, "luns", luns)
		if len(td.Initiators) > 0 {
			in := seqNode()
			for _, name := range td.Initiators {
				in.Content = append(in.Content, strNode(name))
			}
			add(tm, "initiators", in)
		}
		if td.CHAP != nil {
			add(tm, "chap", chapNode(td.CHAP))
		}
		if a := td.ALUA; a != nil {
			am := mapNode(false)
			add(am, "group", intNode(a.Group))
			gs := seqNode()
			for _, g := range a.Groups {
				gm := mapNode(true)
				add(gm, "id", intNode(g.ID))
				add(gm, "state", strNode(g.State))
				gs.Content = append(gs.Content, gm)
			}
			add(am, "groups", gs)
			add(tm, "alua", am)
		}
		if td.NoImmediateData {
			add(tm, "immediate_data", boolNode(false))
		}
		targets.Content = append(targets.Content, tm)
	}
	add(root, "targets", targets)
	if t.DiscoveryCHAP != nil {
		add(root, "discovery_chap", chapNode(t.DiscoveryCHAP))
	}
	lim := mapNode(true)
	add(lim, "max_sessions", intNode(t.Limits.MaxSessions))
	add(lim, "queue_depth", intNode(t.Limits.QueueDepth))
	add(lim, "max_logging_in", intNode(t.Limits.MaxLoggingIn))
	add(lim, "max_logging_in_per_address", intNode(t.Limits.MaxLoggingInPerAddress))
	add(lim, "login_timeout", strNode(formatDuration(t.Limits.LoginTimeout)))
	add(root, "limits", lim)
	add(root, "log", logNode(t.Log))
	if t.Metrics.Listen != "" {
		add(root, "metrics", metricsNode(t.Metrics))
	}
	ctl := mapNode(true)
	add(ctl, "socket", strNode(t.Control.Socket))
	add(root, "control", ctl)
	st := mapNode(true)
	add(st, "dir", strNode(t.State.Dir))
	add(root, "state", st)

	return encodeDoc(root, "ddptarget", "target")
}

// encodeDoc writes root as a YAML document headed by a comment naming
// program, indented as the examples in docs/config.md are.
func encodeDoc(root *yaml.Node, program, what string) ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root},
		HeadComment: program + " configuration, every default spelled out"}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: writing the %s configuration: %w", what, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: writing the %s configuration: %w", what, err)
	}
	return buf.Bytes(), nil
}

// logNode is the log: mapping of either configuration.
func logNode(l Log) *yaml.Node {
	lg := mapNode(true)
	add(lg, "level", strNode(l.Level))
	add(lg, "format", strNode(l.Format))
	return lg
}

// metricsNode is the metrics: mapping of either configuration.
func metricsNode(m Metrics) *yaml.Node {
	mm := mapNode(true)
	add(mm, "listen", strNode(m.Listen))
	return mm
}

func chapNode(c *CHAP) *yaml.Node {
	m := mapNode(false)
	add(m, "user", strNode(c.User))
	add(m, "secret", strNode(c.Secret))
	if c.MutualUser != "" || c.MutualSecret != "" {
		add(m, "mutual_user", strNode(c.MutualUser))
		add(m, "mutual_secret", strNode(c.MutualSecret))
	}
	return m
}

func mapNode(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func seqNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
}

func add(m *yaml.Node, key string, val *yaml.Node) {
	m.Content = append(m.Content, strNode(key), val)
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func intNode(v int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
}

func boolNode(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
}
