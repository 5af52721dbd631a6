package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// stage is a node's webhook delivery as the tests run it: the webhooks
// operator on a real engine over an embedded log and a state store that
// outlive its runs (so a run after a stop is a restart), its dispatcher,
// and the hooks in a metadata store.
type stage struct {
	t     *testing.T
	store *Store
	meta  meta.Store
	log   eventlog.Log
	db    *state.DB

	mu     sync.Mutex
	op     *Operator   // of the current run
	d      *Dispatcher // of the current run
	offset int64       // of the last episode's article (breaking)
}

// dispatcher is the current run's dispatcher.
func (s *stage) dispatcher() *Dispatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d
}

func newStage(t *testing.T) *stage {
	t.Helper()
	return newStageMeta(t, meta.NewLocal(statetest.Open(t)))
}

func newStageMeta(t *testing.T, m meta.Store) *stage {
	t.Helper()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), Fsync: embedded.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		l.Close()
	})
	for _, topic := range []string{schema.TopicStoriesBreaking, schema.TopicWebhookDeliveries} {
		if _, err := eventlog.EnsureTopic(t.Context(), l, topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	return &stage{t: t, store: NewStore(m, nil, true), meta: m, log: l, db: db}
}

// runOptions tune one run of a stage.
type runOptions struct {
	dead   DeadLetter
	writer func() bool // also required of the node to deliver; nil: always
	logger *slog.Logger
	// also are operators the engine runs too; replay names those of them
	// rebuilt from the start of the log before the run.
	also   []engine.Operator
	replay []string
}

// run starts the engine with the webhooks operator and the dispatcher
// until the returned stop (or the test's end); stop returns once both
// did. The dispatcher delivers while the task runs here (and ro.writer).
func (s *stage) run(opts Options, ro runOptions) (stop func()) {
	t := s.t
	t.Helper()
	op := NewOperator(opts, s.store)
	e, err := engine.New(s.log, s.db, engine.Options{Partitions: 2, CommitInterval: 20 * time.Millisecond,
		RestartBackoff: time.Millisecond, MaxRestartBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range append([]engine.Operator{op}, ro.also...) {
		if err := e.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range ro.replay {
		if err := e.Replay(t.Context(), name, func(eventlog.TopicPartition) (int64, error) { return 0, nil }); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	s.op = op
	s.mu.Unlock()
	report := func(ctx context.Context, ev Event) error {
		return s.log.Append(ctx, []*eventlog.Record{ev.Record(time.Now())})
	}
	isWriter := func() bool {
		f, ok := e.Freshness(Name, engine.SingletonPartition)
		return ok && f.Source == "task" && (ro.writer == nil || ro.writer())
	}
	logger := ro.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Every == 0 {
		opts.Every = 20 * time.Millisecond
	}
	client := &http.Client{Transport: &http.Transport{}}
	d, err := New(opts, s.store, op, client, ro.dead, report, isWriter, logger)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.d = d
	s.mu.Unlock()
	ectx, stopEngine := context.WithCancel(context.Background())
	dctx, stopDispatcher := context.WithCancel(context.Background())
	engineDone, dispatcherDone := make(chan error, 1), make(chan error, 1)
	go func() { engineDone <- e.Run(ectx) }()
	go func() { dispatcherDone <- d.Run(dctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopDispatcher()
			if err := <-dispatcherDone; err != nil {
				t.Errorf("dispatcher: %v", err)
			}
			stopEngine()
			if err := <-engineDone; err != nil {
				t.Errorf("engine: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// breaking appends the episode of st (which began breaking at
// st.BreakingSince) as the stories operator emits it, begun by the
// article after the last one's.
func (s *stage) breaking(st *story.Story) {
	s.t.Helper()
	s.mu.Lock()
	s.offset++
	off := s.offset
	s.mu.Unlock()
	s.breakingAt(st, off)
}

// breakingAt appends the episode of st begun by the article at offset
// off of the articles topic.
func (s *stage) breakingAt(st *story.Story, off int64) {
	s.t.Helper()
	v, err := json.Marshal(story.Episode{Story: story.Ranked{Story: st}, Offset: off})
	if err != nil {
		s.t.Fatal(err)
	}
	rec := &eventlog.Record{Topic: schema.TopicStoriesBreaking, Partition: 0, Key: []byte(st.ID), Value: v, Timestamp: time.Now().UnixMilli()}
	if err := s.log.Append(s.t.Context(), []*eventlog.Record{rec}); err != nil {
		s.t.Fatal(err)
	}
}

// pendingIDs lists the delivery ids of the outbox as the current run's
// task last committed it ("" hook: every hook's).
func (s *stage) pendingIDs(hook string) []string {
	s.mu.Lock()
	op := s.op
	s.mu.Unlock()
	var ids []string
	if op == nil {
		return ids
	}
	for _, p := range op.Outbox() {
		if hook == "" || p.Hook == hook {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// episode is a story that began breaking at since (ms).
func episode(id, title string, since int64, topics ...string) *story.Story {
	st := &story.Story{ID: id, Title: title, Breaking: true, BreakingAt: since, BreakingSince: since}
	for _, tp := range topics {
		st.Topics = append(st.Topics, story.Label{Topic: tp, Confidence: 1})
	}
	return st
}
