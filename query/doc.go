// Package query serves newsflow's HTTP API with fasthttp: event ingestion,
// trending and share counts answered from local operator state, health
// checks and Prometheus metrics.
//
// Handlers never block on the stream: reads come from the operators'
// in-memory state (top-K snapshots, exact counts under a read lock), and
// ingestion appends to the log and returns 202 once the records are durable.
// Every error is a JSON object {"error": "...", ...} with a 4xx or 5xx status.
package query
