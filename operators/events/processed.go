package events

// Topics of the article pipeline.
const (
	// TopicArticles carries deduplicated, classified articles from the
	// articles operator to the stories operator. Story clustering needs
	// one total order of all articles, so every record goes to partition
	// 0; the key is the article id.
	TopicArticles = "articles"
	// TopicArticlesIndexed carries articles with their story, keyed and
	// partitioned by article id, to the search index operator. The value
	// is the Article as on TopicArticles; the story is in headers.
	TopicArticlesIndexed = "articles.indexed"
)

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
	Topics    []Label `json:"topics,omitempty"`
	// PublishedAt and FetchedAt are ms since the epoch; PublishedAt is the
	// event time of the article.
	PublishedAt int64 `json:"published_at"`
	FetchedAt   int64 `json:"fetched_at,omitempty"`
	// Version is 1 for the first version and grows with each edit.
	Version int `json:"version"`
}
