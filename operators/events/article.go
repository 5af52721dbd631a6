package events

// TopicArticlesRaw carries crawled items, one record per item, keyed by
// article id (a hash of the canonical URL).
const TopicArticlesRaw = "articles.raw"

// RawArticle is one feed item as the crawler saw it. Times are RFC 3339 in
// JSON. URL is the canonical URL; SourceID names the source it came from.
//
// The JSON value is the raw article of the design brief,
//
//	{"url","source_id","guid","title","summary","content","author","image_url","published_at","fetched_at"}
//
// with image_url optional (records written before it existed decode with
// none): the article's lead image, an absolute http or https URL. The
// articles operator refuses a record whose image_url is not one.
type RawArticle struct {
	URL         string `json:"url"`
	SourceID    string `json:"source_id"`
	GUID        string `json:"guid,omitempty"`
	Title       string `json:"title"`
	Summary     string `json:"summary,omitempty"`
	Content     string `json:"content,omitempty"`
	Author      string `json:"author,omitempty"`
	ImageURL    string `json:"image_url,omitempty"`
	PublishedAt string `json:"published_at"`
	FetchedAt   string `json:"fetched_at"`
}
