// Package eventlog defines newsflow's partitioned log: topics split into a
// fixed number of partitions, each an append-only sequence of records with
// dense, monotonically increasing offsets.
//
// Two backends implement [Log] and pass the same conformance suite
// (package logtest): the embedded backend keeps the log in Pebble on local
// disk and needs nothing else; the kafka backend uses franz-go against any
// Kafka-compatible cluster.
//
// The engine's own producers choose partitions with Kafka's murmur2
// partitioner ([PartitionFor]), so a record keyed the same way lands in the
// same partition whichever backend or Kafka client wrote it.
package eventlog
