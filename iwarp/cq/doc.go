// Package cq implements completion queues for the software RNIC: a bounded,
// lock-free, multi-producer multi-consumer ring of completions (Ring) with
// armed notification in the manner of ibv_req_notify_cq.
//
// Producers are the engine's per-connection goroutines (several QPs may share
// one CQ); consumers are application pollers. Push reports a full ring as a
// CQ overrun, so that the engine can move the QP to the error state. Push and
// Poll are lock-free and allocate nothing.
//
// A consumer that finds the ring empty waits for the next completion, or the
// next solicited one, either with Wait or by arming (Arm) and receiving from
// Notify. Both are level-triggered: a completion that arrives between an
// empty Poll and the wait is never missed. A woken consumer polls until the
// ring is empty before it waits again, as with verbs.
package cq
