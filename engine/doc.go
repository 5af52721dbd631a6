// Package engine is newsflow's dataflow runtime.
//
// Operators declare a [Spec] (name, input topics, co-location key, state
// stores) and create one [Task] per partition. The engine runs every task in
// its own goroutine with the loop
//
//	poll input records → Task.Process each → Task.Flush state changes →
//	append outputs and dead letters → commit state + input offsets in one
//	Pebble batch → Task.Committed
//
// so state and the offsets it reflects are always durable together: after a
// crash (or a task error) the task is rebuilt from its committed state and
// resumes from the committed offsets, and every input record changes state
// exactly once. Outputs are at least once and carry deterministic ids.
//
// An input that needs key co-location declares a Route. External producers
// may partition with any partitioner, so for such inputs the engine adds a
// repartition stage: a task per source partition forwards every record whose
// key belongs to another partition (by Kafka's murmur2) to an internal
// repartition topic, tagged with its source partition and offset. The
// operator's task for partition p applies the records of source partition p
// that belong to p directly, and the forwarded records for p from the
// repartition topic, dropping forwarded records it has already applied (per
// source partition it remembers the highest source offset it applied, in the
// same batch as its state). Records the engine itself produces are already
// murmur2-partitioned and are never forwarded.
//
// Records that do not decode or fail validation never stop a task: the task
// returns an error made with [Invalid], and the engine writes the record to
// the dead-letter topic with the reason and carries on.
package engine
