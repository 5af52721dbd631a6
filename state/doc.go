// Package state keeps operator state in Pebble.
//
// One Pebble database per node holds the state of every task it runs. Each
// task owns a [Namespace] (a key prefix); all of a task's writes for one
// input batch, including the input offsets it has consumed, go into one
// [Batch] and become durable together. After a crash a task reopens its
// namespace and resumes from the offsets stored there, so every input record
// changes state exactly once.
package state
