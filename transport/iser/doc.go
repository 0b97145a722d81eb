// Package iser holds the wire codecs of iSER, the iSCSI Extensions for RDMA
// (RFC 7145): the iSER header that precedes every iSCSI control-type PDU in
// a Send (RFC 7145 section 9.1), the iSER Hello and HelloReply messages
// (sections 9.2 and 9.3) and the iSER connection private data carried in
// the MPA Request and Reply (the "iSER CM REQ/REP" header, defined by the
// InfiniBand Annex A12 and used unchanged by Linux over iWARP).
//
// As everywhere under ddpstore, these are pure codecs: a header is a byte
// slice type with accessors, encoders write into the caller's buffer, and
// nothing here allocates, does I/O or keeps state.
package iser
