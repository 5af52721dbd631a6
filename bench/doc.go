// Package bench holds the end-to-end benchmarks behind `make bench`: share
// throughput from ingestion to committed state (embedded log, Kafka via
// kfake, HTTP), trending query latency under wrk against the real binary,
// and restart-to-ready time and peak memory of the real binary.
//
// The package has no code of its own; everything is in its _test.go files.
// Run one benchmark with, for example,
//
//	go test -run '^$' -bench EndToEndEmbedded -benchmem ./bench
//
// and pipe the output into `go run ./cmd/benchreport` for a table.
//
// BenchmarkTrendingLatency needs wrk on the PATH and skips without it.
// BenchmarkRestartToReady fills the log with 2,000,000 shares by default and
// with 10,000,000 when NEWSFLOW_BENCH_BIG=1; the sub-benchmark's name says
// which. BenchmarkTrendingRestart loads 10,000,000 shares over 5,000,000
// articles (NEWSFLOW_BENCH_TRENDING_SHARES scales it down) and restarts the
// node after SIGTERM and SIGKILL. BenchmarkTrendingVsRedis serves the 1h top
// 100 from the real binary (wrk) and from redis-server (redis-benchmark)
// with the same shares, side by side; it skips without wrk, redis-server or
// redis-benchmark (apt-get install wrk redis-server).
package bench
