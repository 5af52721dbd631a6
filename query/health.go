package query

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"
)

// Health in three tiers:
//   - /health/live: the process answers (always 200);
//   - /health/ready: the node serves with its state caught up: 503 with
//     the reason while its tasks restore, while its standby copy of the
//     story state has not caught up once, and while the server stops;
//   - /health/detailed: every dependency (the log, the state store, the
//     cluster, the crawler) and every stage with its state, and the
//     node's status: restoring (503) while not ready, degraded (200, with
//     the reasons) when it serves but something is wrong that an operator
//     should look at, ok otherwise.
//
// The stages' states come from the engine (StageStates); the crawler's
// and the disk's from the node's gauges (newsflow_crawl_sources_active,
// ..._on_time, newsflow_crawl_open_circuits, newsflow_disk_free_bytes and
// newsflow_disk_size_bytes), read from Options.Gatherer, and are left out
// without them.

// When the detailed health is degraded.
const (
	// degradedLag is how many records a stage may be behind its inputs
	// on this node.
	degradedLag = 100_000
	// degradedStaleness is how stale the node's story state may be: the
	// article_in_story objective's bound.
	degradedStaleness = 60 * time.Second
	// degradedDiskFree is the least fraction of the data directory's
	// file system that must be free.
	degradedDiskFree = 0.05
	// healthTimeout bounds the log's checks.
	healthTimeout = 2 * time.Second
)

// Statuses of /health/detailed and states of its parts.
const (
	healthOK        = "ok"
	healthDegraded  = "degraded"
	healthRestoring = "restoring"
	healthDown      = "down"
	healthDisabled  = "disabled"
)

// The gauges the health checks read.
const (
	gaugeSourcesActive = "newsflow_crawl_sources_active"
	gaugeSourcesOnTime = "newsflow_crawl_sources_on_time"
	gaugeOpenCircuits  = "newsflow_crawl_open_circuits"
	gaugeDiskFree      = "newsflow_disk_free_bytes"
	gaugeDiskSize      = "newsflow_disk_size_bytes"
)

func (s *Server) handleLive(ctx *fasthttp.RequestCtx) {
	writeRaw(ctx, fasthttp.StatusOK, []byte(`{"status":"live"}`))
}

func (s *Server) handleReady(ctx *fasthttp.RequestCtx) {
	if reason, msg := s.notReady(); reason != "" {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason, "error": msg})
		return
	}
	writeRaw(ctx, fasthttp.StatusOK, []byte(`{"status":"ready"}`))
}

// notReady returns why the node is not ready (stopping, standby or
// restoring) with a message, or "" when it is ready.
func (s *Server) notReady() (reason, msg string) {
	if s.stopping.Load() {
		return "stopping", "the server is shutting down"
	}
	if msg := s.notAssigned(); msg != "" {
		return "assigning", msg
	}
	switch {
	case s.deps.Engine.Ready():
		return "", ""
	case s.standbyBehind():
		return "standby", "the standby copy of the story state has not caught up with its changelog yet"
	}
	msg = "tasks are restoring state"
	var restoring []string
	for _, st := range s.deps.Engine.StageStates() {
		if st.Restoring > 0 {
			restoring = append(restoring, st.Stage)
		}
	}
	if len(restoring) > 0 {
		msg += ": " + strings.Join(restoring, ", ")
	}
	return "restoring", msg
}

// notAssigned says why a cluster node cannot answer yet for want of
// partitions: its copy of the cluster state gives some partition no owner
// (formation, or a restarted node whose copy has not caught up with the
// leader's), or gives this node a partition (at an epoch) its engine does
// not run yet. A partition whose owner is down is the cluster's to move,
// not this node's to wait for: it does not make the node unready. "" when
// none of this holds, or outside a cluster (an engine that runs every
// partition).
func (s *Server) notAssigned() string {
	if s.deps.Cluster == nil || !s.deps.Engine.Options().Cluster {
		return ""
	}
	st, _ := s.deps.Cluster.State()
	if st.Partitions == 0 || len(st.Owners) < int(st.Partitions) {
		return "the cluster has not given every partition an owner yet"
	}
	assigned := s.deps.Engine.Assigned()
	me := s.deps.Cluster.ID()
	for p, o := range st.Owners {
		if o.Node == "" {
			return fmt.Sprintf("partition %d has no owner yet", p)
		}
		// A partition this node hands off (Next) is stopping here, not
		// starting.
		if e, ok := assigned[int32(p)]; o.Node == me && o.Next == "" && (!ok || e != o.Epoch) {
			return fmt.Sprintf("this node has not started its partition %d yet", p)
		}
	}
	return ""
}

// standbyBehind reports whether the node keeps a standby copy of the
// story state (a cluster node that does not run the story task) that has
// not caught up with its changelog yet.
func (s *Server) standbyBehind() bool {
	if s.deps.Stories == nil || !s.deps.Engine.Options().Cluster {
		return false
	}
	p := s.storyPartition()
	if _, runs := s.deps.Engine.Assigned()[p]; runs {
		return false
	}
	_, ok := s.deps.Engine.Freshness(story.Name, p)
	return !ok
}

// healthAnswer is the body of /health/detailed.
type healthAnswer struct {
	// Status is ok, degraded or restoring; Reasons say why it is not ok.
	Status       string         `json:"status"`
	Reasons      []string       `json:"reasons,omitempty"`
	UptimeS      int64          `json:"uptime_s"`
	Dependencies healthDeps     `json:"dependencies"`
	Stages       []stageHealth  `json:"stages"`
	Checks       map[string]any `json:"checks"`
}

type healthDeps struct {
	Log     logHealth     `json:"log"`
	State   stateHealth   `json:"state"`
	Cluster clusterHealth `json:"cluster"`
	Crawler crawlerHealth `json:"crawler"`
}

// logHealth: the log answers, and the end offsets of every partition of
// the shares topic are readable (in Kafka, from each partition's leader).
type logHealth struct {
	State              string `json:"state"` // ok, degraded (some offsets unreadable), down
	Reachable          bool   `json:"reachable"`
	EndOffsetsReadable bool   `json:"end_offsets_readable"`
	Error              string `json:"error,omitempty"`
}

// stateHealth: the state store is open, and the data directory's file
// system has room.
type stateHealth struct {
	State         string  `json:"state"` // ok, degraded (disk nearly full), down
	Open          *bool   `json:"open,omitempty"`
	DiskFreeBytes *uint64 `json:"disk_free_bytes,omitempty"`
	DiskSizeBytes *uint64 `json:"disk_size_bytes,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// clusterHealth: the members up and down, the leader, and the partitions
// without an owner that is up. A single node is its own cluster.
type clusterHealth struct {
	State             string   `json:"state"` // ok, degraded
	Single            bool     `json:"single,omitempty"`
	MembersUp         int      `json:"members_up"`
	MembersDown       []string `json:"members_down"`
	Leader            string   `json:"leader,omitempty"`
	LeaderKnown       bool     `json:"leader_known"`
	PartitionsUnowned []int32  `json:"partitions_unowned"`
}

// crawlerHealth: the sources this node crawls, those on time, and the
// open circuits, from the crawler's gauges.
type crawlerHealth struct {
	State         string `json:"state"` // ok, disabled
	SourcesActive *int64 `json:"sources_active,omitempty"`
	SourcesOnTime *int64 `json:"sources_on_time,omitempty"`
	OpenCircuits  *int64 `json:"open_circuits,omitempty"`
}

// stageHealth is one stage of the topology on this node.
type stageHealth struct {
	Stage string `json:"stage"`
	Kind  string `json:"kind"`
	// State is running, restoring, paused, held (the node holds every
	// stage: Held says why), standby (a copy of its state followed here,
	// the task elsewhere) or not_here.
	State string `json:"state"`
	Held  string `json:"held,omitempty"`
	// Tasks are the stage's tasks on this node; Lag the records their
	// inputs hold that they have not committed.
	Tasks int   `json:"tasks"`
	Lag   int64 `json:"lag"`
	// StalenessMS is how stale this node's copy of the state is, for a
	// stage whose state it reads (the stories).
	StalenessMS *int64 `json:"staleness_ms,omitempty"`
}

// handleHealthDetailed answers GET /health/detailed with a healthAnswer:
// 503 while restoring, 200 otherwise. It says nothing about users.
func (s *Server) handleHealthDetailed(ctx *fasthttp.RequestCtx) {
	g := s.readGauges()
	ready := s.deps.Engine.Ready()
	indexes := s.searchLocal()
	h := healthAnswer{Status: healthOK, UptimeS: int64(time.Since(startTime).Seconds()), Checks: s.healthChecks(indexes)}
	reason := func(format string, args ...any) { h.Reasons = append(h.Reasons, fmt.Sprintf(format, args...)) }
	if why, msg := s.notReady(); why != "" {
		reason("%s", msg)
	}

	h.Dependencies.Log = s.logHealth()
	if h.Dependencies.Log.State != healthOK {
		reason("log: %s", h.Dependencies.Log.Error)
	}
	h.Dependencies.State = s.stateHealth(g)
	switch st := h.Dependencies.State; {
	case st.State == healthDown:
		reason("state store: %s", st.Error)
	case st.State == healthDegraded:
		reason("data disk: %d%% free", *st.DiskFreeBytes*100 / *st.DiskSizeBytes)
	}
	h.Dependencies.Cluster = s.clusterHealth()
	cl := h.Dependencies.Cluster
	for _, m := range cl.MembersDown {
		reason("cluster member %s is down", m)
	}
	if !cl.LeaderKnown {
		reason("no cluster leader is known")
	}
	if len(cl.PartitionsUnowned) > 0 {
		reason("partitions %s have no owner that is up", joinInts(cl.PartitionsUnowned))
	}
	h.Dependencies.Crawler = s.crawlerHealth(g)

	h.Stages = s.stageHealth()
	for _, st := range h.Stages {
		switch {
		case st.State == "paused":
			reason("stage %s is paused", st.Stage)
		case st.State == "held":
			reason("stage %s is held: %s", st.Stage, st.Held)
		case ready && st.Lag > degradedLag:
			reason("stage %s is %d records behind", st.Stage, st.Lag)
		}
		if st.StalenessMS != nil && time.Duration(*st.StalenessMS)*time.Millisecond > degradedStaleness {
			reason("the %s state is %d s stale", st.Stage, *st.StalenessMS/1000)
		}
	}
	if missing := s.searchMissingHere(indexes); ready && len(missing) > 0 {
		reason("search partitions %s of this node are not open", joinInts(missing))
	}

	status := fasthttp.StatusOK
	switch {
	case s.stopping.Load():
		status, h.Status = fasthttp.StatusServiceUnavailable, "stopping"
	case !ready:
		status, h.Status = fasthttp.StatusServiceUnavailable, healthRestoring
	case len(h.Reasons) > 0:
		h.Status = healthDegraded
	}
	writeJSON(ctx, status, h)
}

// healthChecks are the engine's readiness and lag per stage, the story
// and search views and the trending memory, as /health/detailed has
// always reported them.
func (s *Server) healthChecks(indexes searchOutcome) map[string]any {
	lag := map[string]int64{}
	for name, st := range s.stageProgress() {
		lag[name] = st.Lag
	}
	checks := map[string]any{"engine": map[string]any{"ready": s.deps.Engine.Ready(), "lag_by_stage": lag}}
	// The exact counters of this node's partitions against their memory
	// budget: mode, bytes per partition, budget, over_budget (and what to
	// do when over).
	checks["trending"] = s.deps.Trending.ExactMemory()
	if s.deps.Stories != nil {
		recent, wm := s.deps.Stories.Recent()
		st := map[string]any{"recent": len(recent), "latest_event": wm}
		// Where this node's story state comes from (the writer task, or a
		// standby copy of it) and how stale it is.
		if f, ok := s.deps.Engine.Freshness(story.Name, s.storyPartition()); ok {
			st["source"], st["staleness_ms"] = f.Source, f.Staleness.Milliseconds()
		} else {
			st["source"] = "none"
		}
		checks["stories"] = st
	}
	if s.deps.Search != nil {
		st := map[string]any{"ok": indexes.err == nil}
		if indexes.err == nil {
			st["articles"], st["missing_partitions"] = indexes.res.Total, indexes.res.Missing
		} else {
			st["error"] = indexes.err.Error()
		}
		checks["search"] = st
	}
	return checks
}

// searchOutcome is a search of this node's partitions for one article.
type searchOutcome struct {
	res *search.Result
	err error
}

// searchLocal searches this node's partitions for one article, to learn
// which are open (nothing without the search operator).
func (s *Server) searchLocal() searchOutcome {
	if s.deps.Search == nil {
		return searchOutcome{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	res, err := s.deps.Search.Search(ctx, searchindex.Request{Limit: 1})
	return searchOutcome{res, err}
}

// logHealth reads the partition count and the end offsets of the shares
// topic.
func (s *Server) logHealth() logHealth {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	n, err := s.deps.Log.Partitions(ctx, schema.TopicShares)
	if err != nil {
		return logHealth{State: healthDown, Error: "unreachable: " + err.Error()}
	}
	for p := range n {
		if _, err := s.deps.Log.Offsets(ctx, eventlog.TopicPartition{Topic: schema.TopicShares, Partition: p}); err != nil {
			return logHealth{State: healthDegraded, Reachable: true, Error: fmt.Sprintf("end offsets of %s/%d: %v", schema.TopicShares, p, err)}
		}
	}
	return logHealth{State: healthOK, Reachable: true, EndOffsetsReadable: true}
}

// stateHealth checks the state store (when the server has it) and the
// room on the data directory's file system (the node's disk gauges).
func (s *Server) stateHealth(g gauges) stateHealth {
	h := stateHealth{State: healthOK}
	if s.deps.State != nil {
		err := s.deps.State.Check()
		open := err == nil
		h.Open = &open
		if err != nil {
			h.State, h.Error = healthDown, err.Error()
			return h
		}
	}
	free, okF := g.value(gaugeDiskFree, "dir", "data")
	size, okS := g.value(gaugeDiskSize, "dir", "data")
	if !okF || !okS {
		return h // not known here
	}
	fb, sb := uint64(free), uint64(size)
	h.DiskFreeBytes, h.DiskSizeBytes = &fb, &sb
	if sb > 0 && free/size < degradedDiskFree {
		h.State = healthDegraded
	}
	return h
}

// clusterHealth reads the node's view of the cluster.
func (s *Server) clusterHealth() clusterHealth {
	if s.deps.Cluster == nil {
		return clusterHealth{State: healthOK, Single: true, MembersUp: 1, MembersDown: []string{}, LeaderKnown: true, PartitionsUnowned: []int32{}}
	}
	st, _ := s.deps.Cluster.State()
	h := clusterHealth{State: healthOK, MembersDown: []string{}, PartitionsUnowned: []int32{}, Leader: s.deps.Cluster.Leader()}
	h.LeaderKnown = h.Leader != ""
	for _, m := range st.Members {
		if m.Up {
			h.MembersUp++
		} else {
			h.MembersDown = append(h.MembersDown, m.ID)
		}
	}
	slices.Sort(h.MembersDown)
	for p := range st.Partitions { // an owner missing from the list counts too
		if m, ok := st.Owner(p); !ok || !m.Up {
			h.PartitionsUnowned = append(h.PartitionsUnowned, p)
		}
	}
	if len(h.MembersDown) > 0 || !h.LeaderKnown || len(h.PartitionsUnowned) > 0 {
		h.State = healthDegraded
	}
	return h
}

// crawlerHealth reads the crawler's gauges.
func (s *Server) crawlerHealth(g gauges) crawlerHealth {
	if s.deps.Crawler == nil {
		return crawlerHealth{State: healthDisabled}
	}
	h := crawlerHealth{State: healthOK}
	for _, f := range []struct {
		name string
		into **int64
	}{{gaugeSourcesActive, &h.SourcesActive}, {gaugeSourcesOnTime, &h.SourcesOnTime}, {gaugeOpenCircuits, &h.OpenCircuits}} {
		if v, ok := g.value(f.name, "", ""); ok {
			n := int64(v)
			*f.into = &n
		}
	}
	return h
}

// stageHealth lists the stages of the topology with what this node does
// for each (engine.StageStates) and their lag here. Before the engine has
// built its topology there are none.
func (s *Server) stageHealth() []stageHealth {
	e := s.deps.Engine
	kinds := map[string]string{}
	homes := map[string]int32{}
	for _, st := range e.Topology() {
		kinds[st.Name] = st.Kind
		if st.Singleton {
			homes[st.Name], _ = e.HomePartition(st.Name)
		}
	}
	n := e.Partitions()
	assigned := e.Assigned()
	lags := map[string]int64{}
	for _, p := range e.Progress() {
		// In a cluster, only the partitions the node runs now.
		if _, ok := assigned[p.Partition%n]; ok || !e.Options().Cluster {
			lags[p.Stage] += p.Lag()
		}
	}
	out := []stageHealth{}
	for _, st := range e.StageStates() {
		h := stageHealth{Stage: st.Stage, Kind: kinds[st.Stage], Tasks: st.Running + st.Restoring, Lag: lags[st.Stage]}
		switch {
		case st.Paused:
			h.State = "paused"
		case st.Held != "":
			h.State, h.Held = "held", st.Held
		case st.Restoring > 0:
			h.State = healthRestoring
		case st.Running > 0:
			h.State = "running"
		case st.Standby > 0:
			h.State = "standby"
		default:
			h.State = "not_here"
		}
		if home, ok := homes[st.Stage]; ok {
			if f, ok := e.Freshness(st.Stage, home); ok {
				ms := f.Staleness.Milliseconds()
				h.StalenessMS = &ms
			}
		}
		out = append(out, h)
	}
	return out
}

// searchMissingHere returns the search partitions this node runs whose
// index is not open, as the search of its partitions found them.
func (s *Server) searchMissingHere(indexes searchOutcome) []int32 {
	if s.deps.Search == nil {
		return nil
	}
	e := s.deps.Engine
	assigned := e.Assigned()
	var missing []int32
	for p := range e.Partitions() {
		if _, ok := assigned[p]; e.Options().Cluster && !ok {
			continue
		}
		// Without any open partition the search fails: all are missing.
		if indexes.err != nil || slices.Contains(indexes.res.Missing, p) {
			missing = append(missing, p)
		}
	}
	return missing
}

func joinInts(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// gauges are the series of the gauges the health checks read, by metric
// name, as the node's registry has them now.
type gauges map[string][]*dto.Metric

// readGauges gathers the node's registry (nothing without one).
func (s *Server) readGauges() gauges {
	g := gauges{}
	if s.opts.Gatherer == nil {
		return g
	}
	// A registry answers what it could gather along with an error.
	mfs, _ := s.opts.Gatherer.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case gaugeSourcesActive, gaugeSourcesOnTime, gaugeOpenCircuits, gaugeDiskFree, gaugeDiskSize:
			g[mf.GetName()] = mf.GetMetric()
		}
	}
	return g
}

// value returns the value of gauge name in its series whose label has
// value (the sum of every series when label is ""), and false when the
// node has no such series.
func (g gauges) value(name, label, value string) (float64, bool) {
	var sum float64
	found := false
	for _, m := range g[name] {
		if label == "" || labelOf(m, label) == value {
			sum += m.GetGauge().GetValue()
			found = true
		}
	}
	return sum, found
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// startTime is when the process started, for /health/detailed.
var startTime = time.Now()
