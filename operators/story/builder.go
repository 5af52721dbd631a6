package story

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/newsflow/newsflow/operators/internal/neardup"
)

// Label is a topic with a confidence in [0, 1].
type Label = schema.Label

// Article is what the story stage reads of a deduplicated, classified
// article.
type Article struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	SourceID  string  `json:"source_id"`
	Source    string  `json:"source,omitempty"`
	Authority float64 `json:"authority"`
	Title     string  `json:"title"`
	Summary   string  `json:"summary,omitempty"`
	// ImageURL is the article's lead image at its outlet, or "".
	ImageURL string  `json:"image_url,omitempty"`
	Topics   []Label `json:"topics,omitempty"`
	// Published is the event time in ms since the epoch: stories group
	// and age by it.
	Published int64 `json:"published_at"`
	// FirstSeen (ms) is when the node first saw the article
	// (schema.Article.FirstSeen); retention ages by it. Zero in records
	// written before it existed: Published stands in (Seen).
	FirstSeen int64 `json:"first_seen,omitempty"`
	// Version counts edits of the article; 1 for the first version.
	Version int `json:"version"`
}

// Seen returns the article's first-seen time, or its publish time for a
// record without one.
func (a *Article) Seen() int64 {
	if a.FirstSeen != 0 {
		return a.FirstSeen
	}
	return a.Published
}

// Fresh reports whether the article was news when the node first saw it:
// published no more than maxAge before. Only fresh articles make a story
// breaking; old news that arrives late (a feed's back catalogue, a blog
// first subscribed to today) is kept and grouped like any other.
func (a *Article) Fresh(maxAge time.Duration) bool {
	return a.FirstSeen == 0 || maxAge <= 0 || a.FirstSeen-a.Published <= maxAge.Milliseconds()
}

// BreakingOptions define when a story is breaking: more than Rate articles
// per minute over Window, from at least Sources distinct sources.
type BreakingOptions struct {
	Window  time.Duration `yaml:"breaking_window"`  // default 30m
	Rate    float64       `yaml:"breaking_rate"`    // default 2 articles per minute
	Sources int           `yaml:"breaking_sources"` // default 5
	// FreshAge is how long after its publication an article may first be
	// seen and still count as news (Article.Fresh; default 24h): only
	// fresh articles count towards breaking and velocity.
	FreshAge time.Duration `yaml:"fresh_age"`
}

// Decay classes and their freshness decay rates per hour.
const (
	ClassBreaking  = "breaking"
	ClassRegular   = "regular"
	ClassEvergreen = "evergreen"
)

// Options configure a Builder.
type Options struct {
	Cluster  ClusterOptions  `yaml:",inline"`
	NearDup  neardup.Options `yaml:",inline"`
	Breaking BreakingOptions `yaml:",inline"`
	// EvergreenTopics are topics whose stories age slowly unless breaking
	// (default science and health).
	EvergreenTopics []string `yaml:"evergreen_topics"`
	// Lambda maps decay classes to freshness decay rates per hour
	// (defaults breaking 0.5, regular 0.1, evergreen 0.02).
	Lambda map[string]float64 `yaml:"-"`
	// MaxTopics caps a story's topic list (default 3).
	MaxTopics int `yaml:"-"`
	// NearDupWindow is how far apart in event time a near-copy may be from
	// the article it copies to join that article's story directly (default
	// 6h). Syndicated copies appear within hours; a later re-run goes
	// through the story clusterer like any other article.
	NearDupWindow time.Duration `yaml:"near_dup_window"`
	// Retention is how long, in first-seen time behind the newest
	// article's, a story is kept after the latest first-seen time of its
	// articles (default schema.DefaultRetention, 30 days; negative keeps
	// every story). A closed story older than it is deleted with
	// everything of it (see Persist), and an article first seen before it
	// is refused (ErrTooOld: the articles stage never makes one in a live
	// stream). The node sets it from
	// retention.articles. It must not be shorter than the story window.
	Retention time.Duration `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{
		Cluster:         DefaultClusterOptions(),
		NearDup:         neardup.DefaultOptions(),
		Breaking:        BreakingOptions{Window: 30 * time.Minute, Rate: 2, Sources: 5, FreshAge: 24 * time.Hour},
		EvergreenTopics: []string{"science", "health"},
		Lambda:          map[string]float64{ClassBreaking: 0.5, ClassRegular: 0.1, ClassEvergreen: 0.02},
		MaxTopics:       3,
		NearDupWindow:   6 * time.Hour,
		Retention:       schema.DefaultRetention,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	option.Fill(&o.Cluster, d.Cluster)
	option.Fill(&o.Breaking, d.Breaking)
	// A class o.Lambda leaves out keeps its default rate.
	maps.Copy(d.Lambda, o.Lambda)
	o.Lambda = d.Lambda
	option.Fill(&o, d)
	return o
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if err := o.Cluster.Validate(); err != nil {
		return err
	}
	if err := o.NearDup.Validate(); err != nil {
		return err
	}
	switch {
	case o.Breaking.Window < 0 || o.Breaking.Rate < 0 || o.Breaking.Sources < 0 || o.Breaking.FreshAge < 0:
		return errors.New("story: breaking thresholds must not be negative")
	case o.NearDupWindow < 0:
		return errors.New("story: near-duplicate window must not be negative")
	case o.MaxTopics < 0:
		return errors.New("story: max topics must not be negative")
	}
	d := DefaultOptions()
	if r, w := cmp.Or(o.Retention, d.Retention), cmp.Or(o.Cluster.Window, d.Cluster.Window); r > 0 && r < w {
		return fmt.Errorf("story: retention %s is shorter than the story window %s", r, w)
	}
	for k, v := range o.Lambda {
		if k != ClassBreaking && k != ClassRegular && k != ClassEvergreen {
			return fmt.Errorf("story: unknown decay class %q", k)
		}
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("story: decay rate of %s must not be negative", k)
		}
	}
	return nil
}

// Story is the public view of a story.
type Story struct {
	// ID is the id of the article that founded the story.
	ID string `json:"id"`
	// Representative is the article shown for the story: the one from the
	// source with the highest authority, then the earliest.
	Representative string  `json:"representative"`
	Title          string  `json:"title"`
	URL            string  `json:"url"`
	SourceID       string  `json:"source_id"`
	Source         string  `json:"source,omitempty"`
	Authority      float64 `json:"authority"`
	// Image is the proxy path of the story's lead image (ImagePath): its
	// representative's image, else the first image among its articles;
	// absent when none of them has one.
	Image        string `json:"image,omitempty"`
	repPublished int64
	repImage     string // the representative's image URL
	firstImage   string // the image URL of the earliest article with one
	// firstImageNum is the article number of firstImage.
	firstImageNum uint64

	Articles int `json:"article_count"`
	// Sources counts articles per source, most first.
	Sources   []SourceCount `json:"sources"`
	FirstSeen int64         `json:"first_seen"`
	LastSeen  int64         `json:"last_seen"`
	Topics    []Label       `json:"topics,omitempty"`
	// Velocity is the number of articles in the hour before LastSeen.
	Velocity float64 `json:"velocity"`
	Breaking bool    `json:"breaking"`
	// BreakingAt is when the story last met the breaking condition.
	BreakingAt int64 `json:"breaking_at,omitempty"`
	// BreakingSince is when its current (or last) breaking episode
	// began: the event time it became breaking after not being so. With
	// the story's id it names the episode (a webhook delivery's).
	BreakingSince int64   `json:"breaking_since,omitempty"`
	DecayClass    string  `json:"decay_class"`
	Lambda        float64 `json:"decay_lambda"`
	// MergedFrom lists stories merged into this one.
	MergedFrom []string `json:"merged_from,omitempty"`
	// MergedInto is set on a story that was merged into another.
	MergedInto string `json:"merged_into,omitempty"`

	topicSum map[string]float64
	recent   []recentArticle // fresh articles within the velocity and breaking windows
	// lastArrival is the latest first-seen time of its articles: the
	// story's age for retention.
	lastArrival int64
}

// SourceCount is the number of articles of a story from one source.
type SourceCount struct {
	SourceID string `json:"source_id"`
	Articles int    `json:"articles"`
}

type recentArticle struct {
	t   int64
	src string
}

// Result reports what Apply did with an article.
type Result struct {
	Story    string
	StoryNum uint64
	// MergedNums are the numbers of the stories in Merged.
	MergedNums []uint64
	// NewStory is true when the article founded Story.
	NewStory bool
	// DuplicateOf is the article this one nearly copies, if any.
	DuplicateOf string
	// Merged lists stories merged into Story.
	Merged []string
	// Update is true when the article had been applied before (an edit or
	// a repeat); its story does not change.
	Update bool
	// BecameBreaking is true when the article made Story breaking after
	// it was not (a new episode, Story.BreakingSince): only the story an
	// article joins can change so.
	BecameBreaking bool
}

// articleState is what the builder keeps of an article while its story
// may still grow.
type articleState struct {
	num   uint64
	story uint64
	doc   neardup.Doc
	t     int64
}

// ArticleRecord is what the builder stores of an article.
type ArticleRecord struct {
	Article
	Num         uint64 `json:"num"`
	Story       uint64 `json:"story"`
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// Image is the proxy path of the article's image (ImagePath), or "".
	Image string `json:"image,omitempty"`

	// fresh is set when the article got its number now: new, or applied
	// again after it left the window, whatever its version.
	fresh bool
}

// Builder turns a sequence of articles into stories. It is deterministic
// and not safe for concurrent use.
type Builder struct {
	opts Options
	c    *Clusterer
	det  *neardup.Detector
	nd   *neardup.Index
	// featureSigs is set when det's signatures are those of features
	// (features.Permutations and features.Seed).
	featureSigs bool

	articles map[string]*articleState
	byNum    map[uint64]string // article num → id, for near-duplicate matches
	expiry   lastHeap          // articles by event time, num as tiebreak
	nextArt  uint64
	wm       int64 // watermark: the latest event (publish) time seen
	seenWM   int64 // the latest first-seen time seen, retention's clock

	stories  map[uint64]*Story // stories with articles in the window
	redirect map[uint64]uint64 // merged story → the one it went into
	mergedID map[string]string // merged story id → the one it went into

	// Changes since the last Persist.
	dirtyStories map[uint64]*Story
	// explaining records explained for each article (SetExplain).
	explaining bool
	explained  Explanation
	// became is set when the story being applied to began a breaking
	// episode (Result.BecameBreaking).
	became        bool
	dirtyArticles []ArticleRecord
	expired       []lastEntry   // window index entries to delete
	closed        []closedStory // stories that left memory
	// deleted lists the stories the last Persist deleted (retention).
	deleted []uint64
	// backfill is set when the state was written before retention: the
	// next Persist indexes the closed stories it holds (see Persist).
	backfill bool
	// backfillNums is set when the state was written before entry
	// numbers were indexed (n keys): the next Persist indexes them.
	backfillNums bool
}

// closedStory is a story that left memory: its latest article is final.
type closedStory struct {
	last int64
	num  uint64
	st   *Story // until its index entry is written
}

// ErrTooOld is returned by Apply for an article first seen longer than the
// retention age before the newest article: its story may have been
// deleted already, and it would found a story only to be deleted.
var ErrTooOld = errors.New("older than the retention age")

// NewBuilder returns an empty builder.
func NewBuilder(opts Options) (*Builder, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	c, err := NewClusterer(opts.Cluster)
	if err != nil {
		return nil, err
	}
	det, err := neardup.NewDetector(opts.NearDup)
	if err != nil {
		return nil, err
	}
	do := det.Options()
	return &Builder{
		opts: opts, c: c, det: det, nd: neardup.NewIndex(),
		articles: map[string]*articleState{},
		byNum:    map[uint64]string{},
		stories:  map[uint64]*Story{},
		redirect: map[uint64]uint64{},
		mergedID: map[string]string{},

		dirtyStories: map[uint64]*Story{},
		featureSigs:  do.Permutations == features.Permutations && do.Seed == features.Seed,
	}, nil
}

// Apply adds an article (or a new version of one) to the stories.
func (b *Builder) Apply(a Article) (Result, error) { return b.ApplyFeatures(a, nil) }

// ApplyFeatures is Apply with the features of the article's title and
// summary, as the articles operator computed them for its record (see
// operators/internal/features); nil, the builder computes them. The result
// and the builder's state are the same either way. The builder keeps
// f.Near.Sig, not f.Terms.
func (b *Builder) ApplyFeatures(a Article, f *features.Doc) (Result, error) {
	if a.ID == "" {
		return Result{}, errors.New("story: article without id")
	}
	if cut, ok := b.cutoff(); ok && a.Seen() < cut {
		return Result{}, fmt.Errorf("story: article %s first seen at %s: %w (%s) behind the newest article",
			a.ID, time.UnixMilli(a.Seen()).UTC().Format(time.RFC3339), ErrTooOld, b.opts.Retention)
	}
	b.seenWM = max(b.seenWM, a.Seen())
	b.became = false
	if b.explaining {
		b.explained = Explanation{}
	}
	// Expire by the watermark, in the builder and the clusterer alike, so
	// that both close the same stories whatever order event times come in.
	b.wm = max(b.wm, a.Published)
	b.expire(b.wm)
	b.c.Advance(b.wm)
	if as, ok := b.articles[a.ID]; ok {
		num := b.resolve(as.story)
		st := b.stories[num]
		if st == nil {
			return Result{}, fmt.Errorf("story: internal error: story %d of article %s is not in memory", num, a.ID)
		}
		first, firstNum := st.firstImage, st.firstImageNum
		if st.Representative == a.ID {
			st.Title, st.URL, st.repImage = a.Title, a.URL, a.ImageURL
			b.dirtyStories[num] = st
		}
		if st.firstImage != "" && st.firstImageNum == as.num {
			st.firstImage = "" // the edit may have changed or dropped it
		}
		st.noteImage(a.ImageURL, as.num)
		st.setImage()
		if st.firstImage != first || st.firstImageNum != firstNum {
			b.dirtyStories[num] = st
		}
		// Near-copies are compared with the latest text.
		doc := b.nearDoc(a, f)
		b.nd.Remove(as.num, as.doc.FP)
		b.nd.Add(as.num, doc.FP)
		as.doc = doc
		b.dirtyArticles = append(b.dirtyArticles, ArticleRecord{Article: a, Num: as.num, Story: as.story, Image: ImagePath(a.ImageURL)})
		return Result{Story: st.ID, StoryNum: num, Update: true}, nil
	}
	doc := b.nearDoc(a, f)
	var res Result
	num, dup, ok := b.nearDuplicate(doc, a.Published)
	var v Vector
	if f != nil {
		v = b.c.VectorizeTerms(f.Terms, a.Published)
	} else {
		v = b.c.Vectorize(Text{Title: a.Title, Body: a.Summary, Time: a.Published})
	}
	names := b.c.Names(v, a.Title, a.Summary)
	if ok && b.c.JoinNames(num, v, names, a.Published) {
		res.DuplicateOf = dup
		if b.explaining {
			b.explained = b.c.LastExplanation()
			b.explained.NearCopyOf = dup
			if st := b.stories[num]; st != nil {
				b.explained.Candidates = []ExplainedCandidate{{Story: num, StoryID: st.ID, Title: st.Title, Size: st.Articles}}
			}
		}
	} else {
		as := b.c.AssignNames(v, names, a.Published)
		if b.explaining {
			b.nameCandidates() // before the merges delete the stories merged
		}
		num = as.Story
		if as.New {
			b.stories[num] = &Story{ID: a.ID, FirstSeen: a.Published, topicSum: map[string]float64{}}
			res.NewStory = true
		}
		for _, m := range as.Merged {
			res.Merged = append(res.Merged, b.stories[m].ID)
			res.MergedNums = append(res.MergedNums, m)
			b.merge(num, m)
		}
	}
	st := b.stories[num]
	if st == nil {
		return res, fmt.Errorf("story: internal error: story %d of article %s is not in memory", num, a.ID)
	}
	an := b.nextArt
	b.nextArt++
	b.addToStory(st, a, an)
	b.dirtyStories[num] = st
	res.Story, res.StoryNum = st.ID, num

	b.articles[a.ID] = &articleState{num: an, story: num, doc: doc, t: a.Published}
	b.byNum[an] = a.ID
	b.nd.Add(an, doc.FP)
	heap.Push(&b.expiry, lastEntry{last: a.Published, num: an})
	b.dirtyArticles = append(b.dirtyArticles, ArticleRecord{Article: a, Num: an, Story: num, DuplicateOf: res.DuplicateOf, Image: ImagePath(a.ImageURL), fresh: true})
	res.BecameBreaking, b.became = b.became, false
	return res, nil
}

// nearDoc returns the fingerprint and signature of article a: those of its
// features f when they are comparable with the detector's, else computed.
func (b *Builder) nearDoc(a Article, f *features.Doc) neardup.Doc {
	if f != nil && b.featureSigs {
		return f.Near
	}
	return b.det.Doc(a.Title, a.Summary)
}

// nearDuplicate finds the closest open article that a document nearly
// copies: least Hamming distance, then lowest article number.
func (b *Builder) nearDuplicate(doc neardup.Doc, now int64) (story uint64, article string, ok bool) {
	best, bestDist := uint64(math.MaxUint64), math.MaxInt
	window := b.opts.NearDupWindow.Milliseconds()
	err := b.nd.Query(doc.FP, b.det.Options().Borderline, func(id, fp uint64, dist int) bool {
		other := b.articles[b.byNum[id]]
		if other == nil || abs(now-other.t) > window || !b.det.Decide(doc, other.doc).Duplicate() {
			return true
		}
		if dist < bestDist || (dist == bestDist && id < best) {
			best, bestDist = id, dist
		}
		return true
	})
	if err != nil || bestDist == math.MaxInt {
		return 0, "", false
	}
	id := b.byNum[best]
	return b.resolve(b.articles[id].story), id, true
}

func (b *Builder) resolve(num uint64) uint64 { return follow(b.redirect, num) }

// follow returns what k was merged into, through a chain of merges, or k
// itself when it was not merged.
func follow[K comparable](merged map[K]K, k K) K {
	for {
		n, ok := merged[k]
		if !ok {
			return k
		}
		k = n
	}
}

// merge folds story from into story into.
func (b *Builder) merge(into, from uint64) {
	dst, src := b.stories[into], b.stories[from]
	b.redirect[from] = into
	b.mergedID[src.ID] = dst.ID
	src.MergedInto = dst.ID
	dst.MergedFrom = append(dst.MergedFrom, src.ID)
	dst.MergedFrom = append(dst.MergedFrom, src.MergedFrom...)
	dst.Articles += src.Articles
	for _, sc := range src.Sources {
		addSource(dst, sc.SourceID, sc.Articles)
	}
	dst.FirstSeen = min(dst.FirstSeen, src.FirstSeen)
	dst.LastSeen = max(dst.LastSeen, src.LastSeen)
	dst.lastArrival = max(dst.lastArrival, src.lastArrival)
	for k, v := range src.topicSum {
		dst.topicSum[k] += v
	}
	dst.recent = append(dst.recent, src.recent...)
	slices.SortStableFunc(dst.recent, func(x, y recentArticle) int { return cmp.Compare(x.t, y.t) })
	if better(src.Authority, src.repPublished, src.Representative, dst.Authority, dst.repPublished, dst.Representative) {
		dst.Representative, dst.Title, dst.URL = src.Representative, src.Title, src.URL
		dst.SourceID, dst.Source, dst.Authority, dst.repPublished = src.SourceID, src.Source, src.Authority, src.repPublished
		dst.repImage = src.repImage
	}
	if src.firstImage != "" {
		dst.noteImage(src.firstImage, src.firstImageNum)
	}
	dst.setImage()
	b.refresh(dst, dst.LastSeen)
	b.dirtyStories[from] = src
	b.dirtyStories[into] = dst
	delete(b.stories, from)
}

// better reports whether representative a beats b: higher authority, then
// earlier, then lower id.
func better(authA float64, tA int64, idA string, authB float64, tB int64, idB string) bool {
	switch {
	case idB == "":
		return true
	case authA != authB:
		return authA > authB
	case tA != tB:
		return tA < tB
	}
	return idA < idB
}

func addSource(st *Story, src string, n int) {
	for i := range st.Sources {
		if st.Sources[i].SourceID == src {
			st.Sources[i].Articles += n
			return
		}
	}
	st.Sources = append(st.Sources, SourceCount{SourceID: src, Articles: n})
}

// addToStory adds article a, numbered num, to story st.
func (b *Builder) addToStory(st *Story, a Article, num uint64) {
	st.Articles++
	addSource(st, a.SourceID, 1)
	st.FirstSeen = min(st.FirstSeen, a.Published)
	st.LastSeen = max(st.LastSeen, a.Published)
	st.lastArrival = max(st.lastArrival, a.Seen())
	for _, l := range a.Topics {
		st.topicSum[l.Topic] += l.Confidence
	}
	if better(a.Authority, a.Published, a.ID, st.Authority, st.repPublished, st.Representative) {
		st.Representative, st.Title, st.URL = a.ID, a.Title, a.URL
		st.SourceID, st.Source, st.Authority, st.repPublished = a.SourceID, a.Source, a.Authority, a.Published
		st.repImage = a.ImageURL
	}
	st.noteImage(a.ImageURL, num)
	st.setImage()
	if a.Fresh(b.opts.Breaking.FreshAge) {
		i, _ := slices.BinarySearchFunc(st.recent, a.Published, func(r recentArticle, t int64) int { return cmp.Compare(r.t, t+1) })
		st.recent = slices.Insert(st.recent, i, recentArticle{t: a.Published, src: a.SourceID})
	}
	b.refresh(st, st.LastSeen)
}

// refresh recomputes a story's derived fields as of event time now.
func (b *Builder) refresh(st *Story, now int64) {
	slices.SortStableFunc(st.Sources, func(x, y SourceCount) int {
		if c := cmp.Compare(y.Articles, x.Articles); c != 0 {
			return c
		}
		return cmp.Compare(x.SourceID, y.SourceID)
	})
	// Topics: the largest confidence sums, as mean confidence per article.
	st.Topics = st.Topics[:0]
	for k, v := range st.topicSum {
		st.Topics = append(st.Topics, Label{Topic: k, Confidence: v / float64(st.Articles)})
	}
	slices.SortFunc(st.Topics, func(x, y Label) int {
		if c := cmp.Compare(y.Confidence, x.Confidence); c != 0 {
			return c
		}
		return cmp.Compare(x.Topic, y.Topic)
	})
	if len(st.Topics) > b.opts.MaxTopics {
		st.Topics = st.Topics[:b.opts.MaxTopics]
	}
	// Keep the articles of the last hour (velocity) and breaking window.
	keep := max(time.Hour, b.opts.Breaking.Window).Milliseconds()
	cut := 0
	for cut < len(st.recent) && st.recent[cut].t < now-keep {
		cut++
	}
	st.recent = st.recent[cut:]
	var hour, win int
	srcs := map[string]struct{}{}
	for _, r := range st.recent {
		if r.t > now-time.Hour.Milliseconds() && r.t <= now {
			hour++
		}
		if r.t > now-b.opts.Breaking.Window.Milliseconds() && r.t <= now {
			win++
			srcs[r.src] = struct{}{}
		}
	}
	st.Velocity = float64(hour)
	rate := float64(win) / b.opts.Breaking.Window.Minutes()
	if rate > b.opts.Breaking.Rate && len(srcs) >= b.opts.Breaking.Sources {
		// A story still flagged breaking from an episode whose window
		// has passed (no article came since to clear the flag) begins a
		// new one.
		switch ongoing := st.Breaking && now-st.BreakingAt <= b.opts.Breaking.Window.Milliseconds(); {
		case !ongoing:
			st.BreakingSince = now
			b.became = true
		case st.BreakingSince == 0: // stored before episodes were named: it goes on
			st.BreakingSince = st.BreakingAt
		}
		st.Breaking, st.BreakingAt = true, now
	} else if now-st.BreakingAt > b.opts.Breaking.Window.Milliseconds() {
		st.Breaking = false
	}
	st.DecayClass = ClassRegular
	switch {
	case st.Breaking:
		st.DecayClass = ClassBreaking
	case len(st.Topics) > 0 && slices.Contains(b.opts.EvergreenTopics, st.Topics[0].Topic):
		st.DecayClass = ClassEvergreen
	}
	st.Lambda = b.opts.Lambda[st.DecayClass]
}

// expire forgets articles older than the clustering window: they can no
// longer be near-duplicate targets, and edits of them are applied as new
// articles of their story by the caller's lookup.
func (b *Builder) expire(now int64) {
	limit := now - b.opts.Cluster.Window.Milliseconds()
	for len(b.expiry) > 0 && b.expiry[0].last < limit {
		e := heap.Pop(&b.expiry).(lastEntry)
		id := b.byNum[e.num]
		as := b.articles[id]
		b.nd.Remove(e.num, as.doc.FP)
		delete(b.byNum, e.num)
		delete(b.articles, id)
		b.expired = append(b.expired, e)
		// A story leaves memory with its last article in the window.
		num := b.resolve(as.story)
		if st := b.stories[num]; st != nil && st.LastSeen < limit {
			delete(b.stories, num)
			b.closed = append(b.closed, closedStory{last: st.arrival(), num: num, st: st})
		}
	}
}

// cutoff returns the first-seen time before which stories and articles
// are deleted, and false when retention is off.
func (b *Builder) cutoff() (int64, bool) {
	if b.opts.Retention < 0 {
		return 0, false
	}
	return b.seenWM - b.opts.Retention.Milliseconds(), true
}

// arrival returns the latest first-seen time of the story's articles, or
// its latest publish time for a story stored before first-seen times.
func (st *Story) arrival() int64 {
	if st.lastArrival != 0 {
		return st.lastArrival
	}
	return st.LastSeen
}

// Current returns the id of the story that story id is part of now: id
// itself, or the story it was merged into.
func (b *Builder) Current(id string) string { return follow(b.mergedID, id) }

// Story returns the current state of a story by number, following merges.
func (b *Builder) Story(num uint64) *Story { return b.stories[b.resolve(num)] }

// StoryOf returns the story an open article belongs to.
func (b *Builder) StoryOf(articleID string) (*Story, bool) {
	as, ok := b.articles[articleID]
	if !ok {
		return nil, false
	}
	return b.Story(as.story), true
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// SetExplain makes the builder record why it put each new article where it
// did (LastExplanation), for newsflow cluster --explain. It changes no
// decision.
func (b *Builder) SetExplain(on bool) {
	b.explaining = on
	b.c.SetExplain(on)
}

// LastExplanation explains what the last Apply did with a new article
// (not an edit or a repeat), when SetExplain is on.
func (b *Builder) LastExplanation() Explanation { return b.explained }

// nameCandidates copies the clusterer's explanation with the id and title
// of each story it names.
func (b *Builder) nameCandidates() {
	x := b.c.LastExplanation()
	x.Candidates = slices.Clone(x.Candidates)
	x.Merges = slices.Clone(x.Merges)
	for _, list := range [][]ExplainedCandidate{x.Candidates, x.Merges} {
		for i := range list {
			if st := b.stories[list[i].Story]; st != nil {
				list[i].StoryID, list[i].Title = st.ID, st.Title
			}
		}
	}
	b.explained = x
}
