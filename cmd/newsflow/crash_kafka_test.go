package main

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newKfake(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestCrashKafka is TestCrashEmbedded with the Kafka backend: a Kafka
// producer with a round-robin partitioner (not murmur2, so the repartition
// stage does real work) writes 1,000,000 shares to kfake while the node is
// SIGKILLed and restarted; the final counts are exact, and the consumer
// group offsets that Kafka tools read show no lag.
func TestCrashKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	cluster := newKfake(t)
	brokers := cluster.ListenAddrs()
	stream := genShares(1_000_000, 5000, 43)

	n := runNode(t, t.TempDir(), nil, "--brokers", brokers[0])

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	stop, done := make(chan struct{}), make(chan struct{})
	var kills atomic.Int64
	go func() { defer close(done); killer(t, n, 5, 2, stop, &kills) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Production is paced over ~10 s so that the node is killed several
	// times while records are still arriving.
	const chunk = 20_000
	for i := 0; i < len(stream.lines); i += chunk {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		var recs []*kgo.Record
		for _, l := range stream.lines[i:min(i+chunk, len(stream.lines))] {
			recs = append(recs, &kgo.Record{Topic: "shares", Key: articleIDOf(l), Value: l})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to kfake: %v", err)
		}
	}
	during := kills.Load()
	close(stop)
	<-done
	if during < 5 {
		t.Fatalf("only %d kills while records were being produced; want >= 5", during)
	}
	n.WaitCaughtUp(5 * time.Minute)
	verifyCounts(t, n, stream.counts)

	// Standard Kafka tooling sees the committed offsets: no lag on shares.
	adm := kadm.NewClient(cl)
	testutil.Eventually(t, 10*time.Second, func() error {
		lags, err := adm.Lag(ctx, "newsflow-trending")
		if err != nil {
			t.Fatal(err)
		}
		var total, committed int64
		lags.Each(func(l kadm.DescribedGroupLag) {
			for _, ps := range l.Lag["shares"] {
				total += ps.Lag
				committed += ps.Commit.At
			}
		})
		if committed < int64(len(stream.lines)) || total != 0 {
			return fmt.Errorf("consumer group newsflow-trending: committed %d of %d, lag %d", committed, len(stream.lines), total)
		}
		return nil
	})
	t.Logf("%d kills during production, %d in all", during, kills.Load())
}

// articleIDOf pulls article_id out of a generated share line.
func articleIDOf(line []byte) []byte {
	const marker = `"article_id":"`
	i := bytes.Index(line, []byte(marker)) + len(marker)
	j := i + bytes.IndexByte(line[i:], '"')
	return line[i:j]
}
