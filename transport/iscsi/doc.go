// Package iscsi holds the wire codecs of iSCSI (RFC 7143) that iSER
// (RFC 7145) carries: the 48-octet Basic Header Segment with typed views
// for the PDUs a target and an initiator need first, SAM LUN helpers, and
// the text key=value data segment of Login and Text negotiation.
//
// As everywhere under ddpstore these are pure codecs: a BHS is a byte slice
// type with accessors and setters (encoders write into the caller's
// buffer), parsing allocates nothing, and nothing here does I/O.
//
// Section numbers in comments are RFC 7143's unless stated otherwise.
package iscsi
