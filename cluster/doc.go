// Package cluster is the control plane of a newsflow cluster: the log
// (Kafka) carries the data, and Raft (hashicorp/raft) replicates what every
// node must agree on.
//
// What is replicated (fsm.go): the members (id, Raft and HTTP addresses,
// up or down, leaving), the assignment of each partition to a node with an
// epoch that grows whenever its owner changes, and the metadata key-value
// pairs (sources, users, preferences, sessions) with create and
// compare-and-swap. The assignment is balanced and sticky: a partition
// moves only when its owner goes down or leaves, or to even out the load
// when a node joins. The Raft log and stable store live in Pebble
// (raftstore.go); snapshots carry the whole state.
//
// A node (node.go) bootstraps a new cluster or joins one through any
// member's HTTP API; a follower forwards its commands to the leader. The
// leader marks a member down when its heartbeats fail for DownAfter, which
// moves its partitions to the others, and up again when it answers. A node
// acts on the partitions it owns only while it is in contact with a quorum
// (InContact, the contact lease), so a node cut off from the others stops
// before its partitions are given away. Meta (meta.go) is the replicated
// meta.Store: reads are local, writes go through Raft and return once
// applied here.
//
// Raft runs over mutual TLS 1.3 (transport.go, which states the threat
// model): certificates derived from the cluster secret, or the operator's.
//
// The engine (engine/assign.go) follows the assignment: it restores an
// assigned partition's state from its changelog, processes it under the
// epoch it was given, and stops when the epoch moves on.
//
// Concurrency: a Node is safe for concurrent use; Close may be called more
// than once and from several goroutines.
package cluster
