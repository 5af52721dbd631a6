package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Options configures the engine. The zero value is valid.
type Options struct {
	// Partitions is the partition count of the topics the engine creates and
	// the number of tasks per operator (default 8).
	Partitions int32 `yaml:"-"`
	// MaxBatch caps the records a task applies per commit (default 20000).
	MaxBatch int `yaml:"max_batch"`
	// CommitInterval is how long a busy task may apply records before it
	// commits them (default 250ms). A task commits at once when it has
	// caught up with its inputs, so the interval only matters under load,
	// where longer intervals write each changed state key less often. After
	// a crash, at most this much input is applied again (exactly once: the
	// offsets are committed with the state).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// DeadLetterTopic receives records that cannot be processed
	// (default "newsflow-deadletter").
	DeadLetterTopic string `yaml:"dead_letter_topic"`
	// MaxRecordFailures is how many times in a row applying one record
	// may fail (its Process panics or returns an error other than
	// Invalid, restarting the task) before the task dead-letters it with
	// the reason and moves on (default 3; negative: never, the task
	// retries it for ever).
	MaxRecordFailures int `yaml:"max_record_failures"`
	// RestartBackoff is the first delay before a failed task restarts; it
	// doubles up to MaxRestartBackoff (defaults 100ms and 10s).
	RestartBackoff    time.Duration `yaml:"-"`
	MaxRestartBackoff time.Duration `yaml:"-"`
	// GroupCommitInterval is how often committed offsets are copied to the
	// backend's consumer groups, if it has them (default 1s).
	GroupCommitInterval time.Duration `yaml:"-"`
	// LagInterval is how often the engine reads the end offsets of every
	// task input to keep lag current while a task does not commit (stuck
	// or paused; default 5s).
	LagInterval time.Duration `yaml:"-"`
	// Cluster makes the engine one node of a cluster: it runs only the
	// partitions given to Assign and keeps every task's state in a
	// changelog as well (see Assign). The log must implement
	// eventlog.Changelogs.
	Cluster bool `yaml:"-"`
	// ChangelogMaxAge is the age beyond which a node's local copy of a
	// task's state is not brought up to date from the changelog but
	// restored from its beginning (default 12h: half the changelog topics'
	// delete retention, after which compaction may drop tombstones).
	ChangelogMaxAge time.Duration `yaml:"-"`
	Logger          *slog.Logger  `yaml:"-"`
	// Tracer, if set, starts a span for each traced record a task applies
	// (see observe.go); without one, trace context passes through.
	Tracer Tracer `yaml:"-"`
	// Registerer receives the engine's metrics (default: a private registry).
	Registerer prometheus.Registerer `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{
		Partitions:          8,
		MaxBatch:            20000,
		CommitInterval:      250 * time.Millisecond,
		DeadLetterTopic:     "newsflow-deadletter",
		MaxRecordFailures:   3,
		RestartBackoff:      100 * time.Millisecond,
		MaxRestartBackoff:   10 * time.Second,
		GroupCommitInterval: time.Second,
		LagInterval:         5 * time.Second,
		ChangelogMaxAge:     12 * time.Hour,
	}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	switch {
	case o.Partitions < 0 || o.Partitions > 4096:
		return fmt.Errorf("engine: partitions %d out of range 1-4096", o.Partitions)
	case o.MaxBatch < 0:
		return fmt.Errorf("engine: max batch %d is negative", o.MaxBatch)
	case o.RestartBackoff < 0 || o.MaxRestartBackoff < 0 || o.GroupCommitInterval < 0 || o.LagInterval < 0 || o.CommitInterval < 0 || o.ChangelogMaxAge < 0:
		return errors.New("engine: durations must not be negative")
	}
	return nil
}

func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions())
	// Made here, not in DefaultOptions (where a node's configuration
	// starts): each engine has a registry of its own.
	option.Fill(&o, Options{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	return o
}

// Engine runs registered operators over a log with state in a state DB.
type Engine struct {
	log  eventlog.Log
	db   *state.DB
	opts Options
	m    *metrics

	ops    []Operator
	stages []*stage // built by Run (or Replay); read by others once built is set

	started atomic.Bool
	built   atomic.Bool // stages is built: readable from any goroutine

	// hold holds every task while set (Hold); holders are who holds it and
	// why (guarded by hold.mu), holdReason their reasons joined.
	hold       pause
	holders    map[string]string
	holdReason atomic.Pointer[string]

	assign struct {
		sync.Mutex
		parts   map[int32]uint64 // cluster mode: partition → epoch
		version uint64           // counts Assign calls
		changed chan struct{}
	}

	mu struct {
		sync.Mutex
		progress map[progressKey]*Progress
		runners  []*taskRunner // the tasks running now
		applied  uint64        // cluster mode: the assignment version they run
		// runnersChanged, if not nil, is closed when runners next change
		// (Stopped).
		runnersChanged chan struct{}
		standbys       map[standbyKey]*standby
	}
}

// New returns an engine over l and db. Register operators, then Run.
func New(l eventlog.Log, db *state.DB, opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	e := &Engine{log: l, db: db, opts: opts, m: newMetrics(opts.Registerer)}
	opts.Registerer.MustRegister(newStageCollector(e))
	e.mu.progress = map[progressKey]*Progress{}
	e.mu.standbys = map[standbyKey]*standby{}
	e.assign.changed = make(chan struct{}, 1)
	return e, nil
}

// Register adds an operator. It must be called before Run.
func (e *Engine) Register(op Operator) error {
	if e.started.Load() {
		return errors.New("engine: register after start")
	}
	s := op.Spec()
	if s.Name == "" {
		return errors.New("engine: operator without a name")
	}
	for _, o := range e.ops {
		if o.Spec().Name == s.Name {
			return fmt.Errorf("engine: operator %q registered twice", s.Name)
		}
	}
	if len(s.Inputs) == 0 {
		return fmt.Errorf("engine: operator %q has no inputs", s.Name)
	}
	if s.MinCommitInterval < 0 {
		return fmt.Errorf("engine: operator %q has a negative commit interval", s.Name)
	}
	if s.Standby && s.LocalState {
		return fmt.Errorf("engine: operator %q keeps local state, which has no changelog to keep a standby copy of", s.Name)
	}
	e.ops = append(e.ops, op)
	return nil
}

// Partitions returns the engine's partition count.
func (e *Engine) Partitions() int32 { return e.opts.Partitions }

// Options returns the options in force, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Stage is one node of the running topology: an operator, or a repartition
// stage the engine added for one of its inputs.
type Stage struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"` // "operator" or "repartition"
	Description string   `json:"description,omitempty"`
	Inputs      []string `json:"inputs"`
	Outputs     []string `json:"outputs,omitempty"`
	Key         string   `json:"key,omitempty"`
	Stores      []string `json:"stores,omitempty"`
	Tasks       int32    `json:"tasks"`
	// Singleton: one task, on partition 0 (Spec.Singleton).
	Singleton bool `json:"singleton,omitempty"`
	Options   any  `json:"options,omitempty"`
}

// RepartitionTopic names the internal topic that co-locates keys of input
// topic for operator op.
func RepartitionTopic(op, topic string) string {
	return "newsflow-" + op + "-" + topic + "-repartition"
}

// Topology lists the stages the registered operators make, in data-flow
// order of registration. Source partition counts are not known before Run,
// so repartition stages list one task per engine partition.
func (e *Engine) Topology() []Stage {
	var out []Stage
	for _, op := range e.ops {
		s := op.Spec()
		st := Stage{Name: s.Name, Kind: "operator", Description: s.Description, Outputs: append(s.Outputs, e.opts.DeadLetterTopic),
			Stores: s.Stores, Tasks: e.opts.Partitions, Singleton: s.Singleton, Options: s.Options}
		if s.Singleton {
			st.Tasks = 1
		}
		for _, in := range s.Inputs {
			st.Inputs = append(st.Inputs, in.Topic)
			if in.Route == nil {
				continue
			}
			rt := RepartitionTopic(s.Name, in.Topic)
			st.Inputs = append(st.Inputs, rt)
			st.Key = in.Key
			out = append(out, Stage{Name: repartitionStageName(s.Name, in.Topic), Kind: "repartition",
				Description: fmt.Sprintf("forwards %s records to the partition of their %s (murmur2) when a producer put them elsewhere", in.Topic, in.Key),
				Inputs:      []string{in.Topic}, Outputs: []string{rt, e.opts.DeadLetterTopic}, Key: in.Key, Tasks: e.opts.Partitions})
		}
		out = append(out, st)
	}
	return out
}

func repartitionStageName(op, topic string) string { return op + "." + topic + ".repartition" }

// HomePartition returns the partition whose owner runs the task of the
// singleton operator op (Spec.Singleton), and false if op is not a
// registered singleton: queries of its state go to that partition's owner.
func (e *Engine) HomePartition(op string) (int32, bool) {
	for _, o := range e.ops {
		if s := o.Spec(); s.Name == op && s.Singleton {
			return SingletonPartition, true
		}
	}
	return 0, false
}

// PartitionWeights returns the relative load of each partition for a
// cluster's assignment: 1, plus 1 for each singleton operator the
// partition's owner runs.
func (e *Engine) PartitionWeights() []int {
	w := make([]int, e.opts.Partitions)
	for i := range w {
		w[i] = 1
	}
	for _, o := range e.ops {
		if o.Spec().Singleton && len(w) > 0 {
			w[SingletonPartition]++
		}
	}
	return w
}

// Run creates missing topics, starts every task and blocks until ctx is
// done and every task has committed its last batch and stopped, or until a
// task fails in a way a restart cannot mend.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("engine: already running")
	}
	if e.stages == nil {
		if err := e.build(ctx); err != nil {
			return err
		}
	}
	lctx, stopLag := context.WithCancel(ctx)
	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		e.watchLag(lctx)
	}()
	defer func() {
		stopLag()
		<-lagDone
	}()
	if e.opts.Cluster {
		return e.runAssigned(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	var all []*taskRunner
	for _, st := range e.stages {
		for p := int32(0); p < st.partitions; p++ {
			tr := &taskRunner{e: e, st: st, p: p}
			all = append(all, tr)
			g.Go(func() error { return tr.run(gctx) })
		}
	}
	e.setRunners(all, 0)
	return g.Wait()
}

// build resolves the topology against the log: it creates topics and
// computes each stage's inputs.
func (e *Engine) build(ctx context.Context) error {
	n := e.opts.Partitions
	ensure := func(topic string) (int32, error) {
		got, err := eventlog.EnsureTopic(ctx, e.log, topic, n)
		if err != nil {
			return 0, fmt.Errorf("engine: ensure topic %s: %w", topic, err)
		}
		return got, nil
	}
	if _, err := ensure(e.opts.DeadLetterTopic); err != nil {
		return err
	}
	for _, op := range e.ops {
		s := op.Spec()
		for _, t := range s.Outputs {
			if _, err := ensure(t); err != nil {
				return err
			}
		}
		main := &stage{name: s.Name, partitions: n, newTask: op.NewTask, inputs: map[int32][]stageInput{}, minCommit: s.MinCommitInterval, localState: s.LocalState, standby: s.Standby}
		if s.Singleton {
			main.partitions = 1
		}
		if f, ok := op.(Follower); ok && s.Standby {
			main.follower = f
		}
		for _, in := range s.Inputs {
			srcParts, err := ensure(in.Topic)
			if err != nil {
				return err
			}
			if s.Singleton {
				if in.Route != nil {
					return fmt.Errorf("engine: singleton operator %s declares a Route for %s", s.Name, in.Topic)
				}
				main.inputs[0] = append(main.inputs[0], stageInput{tp: eventlog.TopicPartition{Topic: in.Topic, Partition: SingletonPartition}})
				continue
			}
			if in.Route == nil {
				if srcParts != n {
					return fmt.Errorf("engine: operator %s reads %s with %d partitions, want %d (declare a Route to repartition)", s.Name, in.Topic, srcParts, n)
				}
				for p := int32(0); p < n; p++ {
					main.inputs[p] = append(main.inputs[p], stageInput{tp: eventlog.TopicPartition{Topic: in.Topic, Partition: p}})
				}
				continue
			}
			rt := RepartitionTopic(s.Name, in.Topic)
			rp, err := ensure(rt)
			if err != nil {
				return err
			}
			if rp != n {
				return fmt.Errorf("engine: repartition topic %s has %d partitions, want %d", rt, rp, n)
			}
			for p := int32(0); p < n; p++ {
				if p < srcParts {
					main.inputs[p] = append(main.inputs[p], stageInput{tp: eventlog.TopicPartition{Topic: in.Topic, Partition: p}, mode: modeLocal, route: in.Route})
				}
				main.inputs[p] = append(main.inputs[p], stageInput{tp: eventlog.TopicPartition{Topic: rt, Partition: p}, mode: modeForwarded})
			}
			if main.forwardedFrom == nil {
				main.forwardedFrom = map[string]string{}
			}
			main.forwardedFrom[rt] = in.Topic
			rs := &stage{name: repartitionStageName(s.Name, in.Topic), partitions: srcParts, inputs: map[int32][]stageInput{}, repartition: true}
			rs.newTask = newRepartitionTask(rs.name, rt, in.Route, n)
			for sp := int32(0); sp < srcParts; sp++ {
				rs.inputs[sp] = []stageInput{{tp: eventlog.TopicPartition{Topic: in.Topic, Partition: sp}}}
			}
			e.stages = append(e.stages, rs)
		}
		e.stages = append(e.stages, main)
	}
	for _, st := range e.stages {
		st.fresh = make([]*freshness, st.partitions)
		for i := range st.fresh {
			st.fresh[i] = new(freshness)
		}
	}
	e.m.initStages(e)
	e.built.Store(true)
	return nil
}

// Ready reports whether every task has restored its state and is
// processing. In a cluster: every task of the last assignment, and every
// standby copy has caught up with its changelog once; a node assigned no
// partitions and keeping no copies is ready once it runs.
func (e *Engine) Ready() bool {
	if !e.started.Load() {
		return false
	}
	e.assign.Lock()
	version := e.assign.version
	e.assign.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.mu.runners) == 0 && !e.opts.Cluster || e.opts.Cluster && e.mu.applied != version {
		return false
	}
	for _, tr := range e.mu.runners {
		if !tr.restored.Load() {
			return false
		}
	}
	for _, sb := range e.mu.standbys {
		if !sb.loaded.Load() {
			return false
		}
	}
	return true
}

// Progress is a task input's position: Committed is the next offset the
// task will read (everything before it is reflected in committed state);
// HighWatermark is the partition's end offset as last seen by the task.
type Progress struct {
	Stage         string `json:"stage"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`

	updated time.Time // when the task last set Committed
}

// Lag is HighWatermark - Committed, never negative.
func (p Progress) Lag() int64 { return max(0, p.HighWatermark-p.Committed) }

type progressKey struct {
	stage string
	tp    eventlog.TopicPartition
}

func (e *Engine) setProgress(stage string, tp eventlog.TopicPartition, committed, hw int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := progressKey{stage, tp}
	p := e.mu.progress[k]
	if p == nil && committed < 0 {
		// The watermark of an input this node no longer runs (its
		// partition moved while the lag was read): not its to report.
		return
	}
	if p == nil {
		p = &Progress{Stage: stage, Topic: tp.Topic, Partition: tp.Partition}
		e.mu.progress[k] = p
	}
	if committed >= 0 {
		p.Committed, p.updated = committed, time.Now()
	}
	if hw >= 0 {
		p.HighWatermark = max(hw, committed)
	}
}

// Progress returns the position of every task input, sorted.
func (e *Engine) Progress() []Progress {
	e.mu.Lock()
	out := make([]Progress, 0, len(e.mu.progress))
	for _, p := range e.mu.progress {
		out = append(out, *p)
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// CaughtUp reports whether every task has committed everything that was in
// the log when this call asked the log for its end offsets.
func (e *Engine) CaughtUp(ctx context.Context) (bool, error) {
	if !e.Ready() {
		return false, nil
	}
	for _, p := range e.Progress() {
		o, err := e.log.Offsets(ctx, eventlog.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		if err != nil {
			return false, err
		}
		if p.Committed < o.End {
			return false, nil
		}
	}
	return true, nil
}
