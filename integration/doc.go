// Package integration holds ddpstore's end-to-end tests: real ddptarget and
// ddpinitiator processes, fio, loop devices, filesystems, and interoperability
// with Linux's own iWARP and iSER implementations. It has no code of its own.
package integration
