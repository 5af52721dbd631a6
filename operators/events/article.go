package events

// TopicArticlesRaw carries crawled items, one record per item, keyed by
// article id (a hash of the canonical URL).
const TopicArticlesRaw = "articles.raw"

// RawArticle is one feed item as the crawler saw it. Times are RFC 3339 in
// JSON. URL is the canonical URL; SourceID names the source it came from.
type RawArticle struct {
	URL         string `json:"url"`
	SourceID    string `json:"source_id"`
	GUID        string `json:"guid,omitempty"`
	Title       string `json:"title"`
	Summary     string `json:"summary,omitempty"`
	Content     string `json:"content,omitempty"`
	Author      string `json:"author,omitempty"`
	PublishedAt string `json:"published_at"`
	FetchedAt   string `json:"fetched_at"`
}
