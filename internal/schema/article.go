package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// TopicArticlesRaw carries crawled items, one record per item, keyed by
// article id (a hash of the canonical URL).
const TopicArticlesRaw = "articles.raw"

// RawArticle is one feed item as the crawler saw it. Times are RFC 3339 in
// JSON, or ms since the epoch (Time). URL is the canonical URL; SourceID names the source it came from.
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
	PublishedAt Time   `json:"published_at"`
	FetchedAt   Time   `json:"fetched_at"`
}

// Time is a time of a raw article as its producer wrote it: an RFC 3339
// string, or milliseconds since the epoch (a JSON number, kept as its
// digits). It is written back as a string either way.
type Time string

// UnmarshalJSON accepts a string, an integer number or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*t = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Time(s)
		return nil
	}
	if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
		return fmt.Errorf("time %s: want an RFC 3339 string or ms since the epoch", b)
	}
	*t = Time(b)
	return nil
}
