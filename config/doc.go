// Package config reads the YAML configuration of ddptarget and ddpinitiator
// strictly (unknown fields are errors, and every error names the file, line
// and field) and supplies the embedded defaults the programs run with when
// no file is given.
//
// # The target configuration
//
// ParseTarget and LoadTarget read a file like this one:
//
//	portals:                      # default: one tcp portal on 127.0.0.1:3260
//	  - listen: 127.0.0.1:3260    # host:port; [::1]:3260 for IPv6; :3260 for every address
//	    transport: tcp            # tcp (default), sctp or sctp-udp
//	    mpa: {revision: 2, markers: false, crc: true}   # tcp only; these are the defaults
//	targets:                      # at least one
//	  - name: iqn.2026-11.io.ddpstore:disk1             # an iSCSI name, unique
//	    alias: disk1                                    # optional
//	    luns:                                           # at least one; ids unique, 0..16383
//	      - {id: 0, path: /var/lib/ddpstore/disk1.img, size: 1GiB}
//	      - {id: 1, memory: 256MiB}
//	      - {id: 2, path: /dev/sdb, readonly: true}
//	    initiators: [iqn.2026-11.io.ddpstore:host1]     # optional; none: any initiator
//	    chap: {user: u, secret: initiator-secret, mutual_user: t, mutual_secret: target-secret}
//	discovery_chap: {user: u, secret: discovery-secret} # optional
//	limits: {max_sessions: 64, queue_depth: 128}        # defaults; 1..65535 and 1..4096
//	log: {level: info, format: text}                    # defaults
//
// A LUN has exactly one of path (an absolute path of a regular file or block
// device) and memory (a size). size goes with path only and is the size of
// the file, which the daemon needs when it creates a missing file. Sizes are
// integer octets or a number with a binary unit (B, KiB, MiB, GiB, TiB; see
// Size) and LUN sizes are whole 512-octet blocks. Two LUNs may share a path
// only if both are readonly.
//
// iSCSI names follow RFC 7143 section 4.2.7 (CheckISCSIName): iqn.YYYY-MM.
// reversed.domain[:anything], eui. and 16 hex digits, naa. and 16 or 32 hex
// digits, lower case, at most 223 octets.
//
// CHAP: user and secret are what an initiator must present; mutual_user and
// mutual_secret, what the target presents back. Each pair is given whole,
// mutual CHAP only with one-way CHAP, and secrets are at least 12 octets
// (96 bits, RFC 7143 section 9.2.1: ddpstore has no IPsec to excuse shorter
// ones). No secret that authenticates initiators (secret) may authenticate a
// target (mutual_secret) anywhere in the file. Messages never show secrets;
// Target.Marshal does write them.
//
// A Target is always complete: ParseTarget fills in every default, and
// Target.Marshal writes the effective configuration back, so that
// ParseTarget(Marshal(t)) equals t. DefaultTarget is the embedded
// default-target.yaml, parsed by ParseTarget like any file.
//
// # The initiator configuration
//
// ParseInitiator and LoadInitiator read a file like this one:
//
//	initiator_name: iqn.2026-11.io.ddpstore:host1       # required: this host's iSCSI name
//	targets:                                            # at least one
//	  - name: iqn.2026-11.io.ddpstore:disk1             # an iSCSI name, unique
//	    portals: [127.0.0.1:3260]                       # host:port to dial, in order; at least one
//	    transport: tcp                                  # tcp (default), sctp or sctp-udp
//	    luns: [0, 1]                                    # LUN numbers 0..16383; none: every LUN
//	    chap: {user: u, secret: initiator-secret, mutual_user: t, mutual_secret: target-secret}
//	discovery_chap: {user: u, secret: discovery-secret} # optional, for SendTargets
//	queue_depth: 128                                    # defaults from here on; 1..4096
//	buffers: 64MiB                                      # per session; 1MiB..4GiB in 4KiB pages
//	mpa: {revision: 2, markers: false, crc: true}       # tcp targets only
//	mount: {direct_io: true, max_write: 1MiB, allow_other: false}   # max_write 4KiB..1MiB in pages
//	recovery_timeout: 30s                               # 1s..1h
//	nop: {interval: 5s, timeout: 15s}                   # 1s..1h each; interval 0 turns keepalive off
//	log: {level: info, format: text}
//
// Portals are addresses to dial: a host (IPv4, [IPv6] or a name; not empty,
// not 0.0.0.0 or [::]) and a port, each once per target. Durations are Go
// durations (time.ParseDuration: 500ms, 30s, 1m30s, 1h); a bare number is
// refused, since 30 could mean seconds or nanoseconds. CHAP follows the
// target's rules: user and secret are what this initiator presents,
// mutual_user and mutual_secret what the target must present back. mpa is
// refused when no target uses tcp, and nop.timeout when nop.interval is 0.
//
// The flat settings (every field but targets and discovery_chap) can be
// overridden by command-line flags named after them (queue_depth is
// --queue-depth, nop.interval is --nop-interval): Initiator.Override checks a
// flag's value as the file's, and InitiatorFlags defines the flags on a
// flag.FlagSet. An Initiator is complete as Targets are, Initiator.Marshal
// round-trips, and DefaultInitiator is the embedded default-initiator.yaml,
// which logs in to DefaultTarget's target.
//
// # Errors
//
// ParseTarget and ParseInitiator report every defect they find, not only the
// first, as an errors.Join of *Error values sorted by position, each
// formatted as
//
//	disk.yaml:12: targets[0].luns[1].size: "12QB" is not a size (use a number with KiB, MiB, GiB or TiB)
//
// with a column after the line where the line alone is ambiguous (inside a
// flow collection such as {id: 0, memory: 1GiB}). Checked: YAML syntax (at the
// line where reading goes wrong), one document per file, empty files, types
// (a list where a mapping belongs, a quoted number, yes for true), unknown
// fields (with the allowed ones and a suggestion), duplicate fields, merge
// keys and unusual tags, and every rule above. Anchors and aliases are
// allowed; a defect inside an aliased value is reported where the anchored
// value is written, and a file whose aliases expand beyond a million nodes is
// refused.
//
// # The reader
//
// Files are parsed with gopkg.in/yaml.v3 into yaml.Node trees and walked
// against the schema by a small reader (decode.go) that keeps each node's
// position: yaml.v3's own decoder is not used, since it stops at the first
// error, loses positions and accepts duplicate keys in places. The initiator
// configuration shares the reader and its parts with the target's: Size,
// CHAP and the secret rule, MPA and the transport names, CheckISCSIName, the
// log settings and host:port checking (without the empty host, which only a
// listener accepts).
package config
