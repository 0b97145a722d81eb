// Package siw holds the interoperability tests of ddpstore's software RNIC
// against Linux's soft-iWARP (siw). They run inside the vmlab guest (see
// ../shared/vmlab), whose stock Debian kernel has siw; on any other machine
// they skip. What they found about siw is in docs/interop.md.
package siw
