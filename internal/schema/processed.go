package schema

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/valyala/fastjson"
)

// Topics of the article pipeline.
const (
	// TopicArticles carries deduplicated, classified articles, with the
	// features of their text (ProcessedArticle), from the articles
	// operator to the stories operator. Story clustering needs
	// one total order of all articles, so every record goes to partition
	// 0; the key is the article id.
	TopicArticles = "articles"
	// TopicArticlesIndexed carries articles with their story, keyed and
	// partitioned by article id, to the search index operator. The value
	// is the Article as on TopicArticles, without its Features; the story
	// is in headers.
	TopicArticlesIndexed = "articles.indexed"
	// TopicStoriesBreaking carries one record each time a story begins a
	// breaking episode, from the stories operator (in partition 0, keyed
	// by story id) to the webhooks operator: the story as it was then and
	// the offset of the article that began it, JSON (the stories
	// operator's Episode), its episode named by its id and
	// breaking_since.
	TopicStoriesBreaking = "stories.breaking"
	// TopicWebhookDeliveries carries what became of webhook deliveries
	// (the webhooks operator's Event: a try's outcome, or a delivery
	// imported from an older release's outbox), in partition 0, keyed by
	// hook id, from the node that delivers to the webhooks operator.
	TopicWebhookDeliveries = "webhooks.deliveries"
)

// DefaultRetention is how long, in event time behind the newest article,
// the article pipeline keeps an article: the articles operator its
// version, the story stage its story (counted from the story's latest
// article), the search index its document. Each stage takes it as an
// option (retention.articles in the node configuration); an article
// already older than it when it arrives is dead-lettered.
const DefaultRetention = 30 * 24 * time.Hour

// Headers of TopicArticlesIndexed records.
const (
	// HeaderStoryID is the story the article joined.
	HeaderStoryID = "nf-story-id"
	// HeaderDuplicateOf is the article it nearly copies, if any.
	HeaderDuplicateOf = "nf-duplicate-of"
)

// Label is a topic with a confidence in [0, 1].
type Label struct {
	Topic      string  `json:"topic"`
	Confidence float64 `json:"confidence"`
}

// Article is a deduplicated, cleaned and classified article. Text fields
// are valid UTF-8 without markup; Content is truncated.
type Article struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	SourceID  string  `json:"source_id"`
	Source    string  `json:"source,omitempty"`
	Authority float64 `json:"authority"`
	Title     string  `json:"title"`
	Summary   string  `json:"summary,omitempty"`
	Content   string  `json:"content,omitempty"`
	Author    string  `json:"author,omitempty"`
	// ImageURL is the lead image of the raw article (absolute http or
	// https), or "": optional, absent from records written before it
	// existed. Readers never load it directly: the node serves it through
	// its image proxy.
	ImageURL string  `json:"image_url,omitempty"`
	Topics   []Label `json:"topics,omitempty"`
	// PublishedAt and FetchedAt are ms since the epoch; PublishedAt is the
	// event time of the article: stories group by it and ranking ages by
	// it.
	PublishedAt int64 `json:"published_at"`
	FetchedAt   int64 `json:"fetched_at,omitempty"`
	// FirstSeen (ms) is when the node first saw the article: the log time
	// of the raw record of its first version (see operators/articles).
	// Retention ages articles, stories and search documents by it, never
	// by PublishedAt, so that old news is kept like any other. Absent
	// from records written before it existed; Seen stands in for it.
	FirstSeen int64 `json:"first_seen,omitempty"`
	// Version is 1 for the first version and grows with each edit.
	Version int `json:"version"`
}

// Seen returns the article's first-seen time, or its publish time for a
// record written before first-seen times existed.
func (a *Article) Seen() int64 {
	if a.FirstSeen != 0 {
		return a.FirstSeen
	}
	return a.PublishedAt
}

// ProcessedArticle is a record of TopicArticles as the articles operator
// writes it: the Article and its Features. Readers that do not need the
// features decode the record as an Article.
type ProcessedArticle struct {
	Article
	// Features are absent from records written before they existed.
	Features *Features `json:"features,omitempty"`
}

// Features are what the story stage derives from an article's own title
// and summary, whatever the other articles (operators/internal/features
// computes them): the articles operator, partitioned, computes them so that
// the single stories task need not. The stories task computes them itself
// for a record without them or with another Version.
type Features struct {
	// Version is the version of the computation (features.Version).
	Version int `json:"v"`
	// SimHash is the near-duplicate fingerprint of the title and summary,
	// 16 lower-case hex digits.
	SimHash string `json:"simhash"`
	// MinHash is the MinHash signature of the 3-word shingles of the title
	// and summary: 128 little-endian uint32s (512 bytes; base64 in JSON).
	MinHash []byte `json:"minhash"`
	// Terms are the story clusterer's index terms of the title and summary
	// (before IDF weighting, which depends on the stream) in order of first
	// occurrence, each as "term:<count in the title>:<count in the
	// summary>", separated by spaces: "rate:1:2 hike:0:1".
	Terms string `json:"terms"`
}

// MaxArticleTopics bounds the topics ArticleTopics returns: the classifier
// keeps fewer (max_labels in configs/topics.yaml).
const MaxArticleTopics = 8

// ArticleTopics reads the id and the topic names of an article record
// (TopicArticles, TopicArticlesIndexed) and nothing else of it. The topics
// come in the article's order (best first), each once, at most
// MaxArticleTopics; a topic name must be a valid category (as a share's).
// p is reused between calls and must not be shared between goroutines.
func ArticleTopics(p *fastjson.Parser, data []byte) (id string, topics []string, err error) {
	v, err := p.ParseBytes(data)
	if err != nil {
		return "", nil, fmt.Errorf("malformed JSON: %w", err)
	}
	o, err := v.Object()
	if err != nil {
		return "", nil, errors.New("article is not a JSON object")
	}
	if id, err = str(o, "id", MaxIDBytes, true); err != nil {
		return "", nil, err
	}
	tv := o.Get("topics")
	if tv == nil || tv.Type() == fastjson.TypeNull {
		return id, nil, nil
	}
	labels, err := tv.Array()
	if err != nil {
		return "", nil, &FieldError{"topics", "must be an array of labels"}
	}
	for i, l := range labels {
		lo, err := l.Object()
		if err != nil {
			return "", nil, &FieldError{fmt.Sprintf("topics[%d]", i), "must be an object"}
		}
		name, err := str(lo, "topic", MaxLabelBytes, true)
		if err != nil {
			return "", nil, fmt.Errorf("topics[%d]: %w", i, err)
		}
		if len(topics) < MaxArticleTopics && !slices.Contains(topics, name) {
			topics = append(topics, name)
		}
	}
	return id, topics, nil
}
