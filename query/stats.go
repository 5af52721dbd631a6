package query

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/valyala/fasthttp"
)

// stageStats is one stage of GET /api/v1/admin/stats.
type stageStats struct {
	Stage     string `json:"stage"`
	Committed int64  `json:"committed"`
	Lag       int64  `json:"lag"`
	// EventsPerSec is the rate of committed input records between the
	// previous stats request (at least a second earlier) and this one.
	EventsPerSec float64 `json:"events_per_s"`
}

// handleStats answers GET /api/v1/admin/stats: records per second and lag
// per stage, dead letters, and the size on disk of each store.
func (s *Server) handleStats(ctx *fasthttp.RequestCtx) {
	byStage := s.stageProgress()
	totals := make(map[string]int64, len(byStage))
	for name, st := range byStage {
		totals[name] = st.Committed
	}
	rates, interval := s.rates.observe(s.opts.Now(), totals)
	stages := make([]stageStats, 0, len(byStage))
	for name, st := range byStage {
		st.EventsPerSec = rates[name]
		stages = append(stages, st)
	}
	slices.SortFunc(stages, func(a, b stageStats) int { return cmp.Compare(a.Stage, b.Stage) })
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := map[string]any{
		"uptime_s":      int64(time.Since(startTime).Seconds()),
		"ready":         s.deps.Engine.Ready(),
		"stages":        stages,
		"rate_window_s": interval.Seconds(),
	}
	dlTopic := s.deps.Engine.Options().DeadLetterTopic
	if n, err := topicRecords(cctx, s.deps.Log, dlTopic); err != nil {
		body["dead_letters_error"] = err.Error()
	} else {
		body["dead_letters"] = n
	}
	body["dead_letter_topic"] = dlTopic
	if s.opts.DataDir != "" {
		body["stores"] = s.sizes.get(s.opts.DataDir, s.opts.Now())
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}

// stageProgress sums the committed offsets and lag of each stage's inputs.
func (s *Server) stageProgress() map[string]stageStats {
	out := map[string]stageStats{}
	for _, p := range s.deps.Engine.Progress() {
		st := out[p.Stage]
		st.Stage = p.Stage
		st.Committed += p.Committed
		st.Lag += p.Lag()
		out[p.Stage] = st
	}
	return out
}

// topicRecords counts the records a topic holds now (0 if it does not
// exist yet).
func topicRecords(ctx context.Context, log eventlog.Log, topic string) (int64, error) {
	parts, err := log.Partitions(ctx, topic)
	if errors.Is(err, eventlog.ErrUnknownTopic) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for p := range parts {
		off, err := log.Offsets(ctx, eventlog.TopicPartition{Topic: topic, Partition: p})
		if err != nil {
			return 0, err
		}
		n += off.End - off.Start
	}
	return n, nil
}

// rateMeter turns cumulative counts into rates between observations at
// least a second apart; observations closer than that reuse the last rates.
type rateMeter struct {
	mu       sync.Mutex
	at       time.Time
	totals   map[string]int64
	rates    map[string]float64
	interval time.Duration
}

func (m *rateMeter) observe(now time.Time, totals map[string]int64) (map[string]float64, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.totals != nil && now.Sub(m.at) < time.Second {
		return m.rates, m.interval
	}
	rates := make(map[string]float64, len(totals))
	if m.totals != nil {
		dt := now.Sub(m.at)
		for k, v := range totals {
			if prev, ok := m.totals[k]; ok && v >= prev {
				rates[k] = float64(v-prev) / dt.Seconds()
			}
		}
		m.interval = dt
	}
	m.at, m.totals, m.rates = now, totals, rates
	return rates, m.interval
}

// storeSizes reports the bytes on disk of each directory under the data
// directory (log, state, search), measured at most every 10 seconds.
type storeSizes struct {
	mu    sync.Mutex
	at    time.Time
	sizes map[string]int64
}

func (c *storeSizes) get(dir string, now time.Time) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sizes != nil && now.Sub(c.at) < 10*time.Second {
		return c.sizes
	}
	sizes := map[string]int64{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		var n int64
		_ = filepath.WalkDir(filepath.Join(dir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // files come and go under compaction
			}
			if info, err := d.Info(); err == nil && d.Type().IsRegular() {
				n += info.Size()
			}
			return nil
		})
		sizes[e.Name()] = n
	}
	c.at, c.sizes = now, sizes
	return sizes
}
