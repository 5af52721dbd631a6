package crawl

import (
	"context"
	"html"
	"net/url"
	"strings"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/fulltext"
	"github.com/newsflow/newsflow/internal/polite"
)

// FullTextOptions configure fetching the pages of new items for their full
// text, for sources whose feeds carry only a headline and a line.
type FullTextOptions struct {
	// Disabled turns full-text fetching off for every source, whatever
	// its full_text setting.
	Disabled bool
	// MinWords: an item without content whose summary has fewer words
	// carries only a line (default 25). In auto mode a source's new items
	// get their full text when most items of the fetched feed carry only a
	// line.
	MinWords int
	// MaxPerCrawl caps the pages fetched in one crawl of one source
	// (default 10), so that a feed that returns after a long pause does
	// not hold a crawl worker for minutes; the other new items keep the
	// feed's text.
	MaxPerCrawl int
	// MaxBytes caps the extracted text of an article (default 32 KiB, the
	// articles stage's content limit).
	MaxBytes int
}

// DefaultFullTextOptions returns the defaults the zero value stands for.
func DefaultFullTextOptions() FullTextOptions {
	return FullTextOptions{MinWords: 25, MaxPerCrawl: 10, MaxBytes: 32 << 10}
}

// wantsFullText returns the new items of a crawl of source s whose pages
// are to be fetched, at most MaxPerCrawl, in feed order.
func (c *Crawler) wantsFullText(s *Source, all []feed.Item, fresh []*feed.Item) []*feed.Item {
	o := c.opts.FullText
	if o.Disabled || len(fresh) == 0 {
		return nil
	}
	var out []*feed.Item
	switch s.FullText {
	case FullTextNever:
		return nil
	case FullTextAlways:
		out = fresh
	default: // auto
		short := 0
		for i := range all {
			if fulltext.OnlyALine(all[i].Summary, all[i].Content, o.MinWords) {
				short++
			}
		}
		if short*2 <= len(all) {
			return nil
		}
		for _, it := range fresh {
			if fulltext.OnlyALine(it.Summary, it.Content, o.MinWords) {
				out = append(out, it)
			}
		}
	}
	return out[:min(len(out), o.MaxPerCrawl)]
}

// fillFullText fetches the pages of items through the crawler's fetcher,
// host limiter and robots.txt rules and puts the main text of each into
// its Content. An item whose page cannot be fetched or read keeps the
// feed's text; after a failed fetch the crawl stops trying that host.
func (c *Crawler) fillFullText(ctx context.Context, items []*feed.Item, rec *CrawlRecord) {
	failedHosts := map[string]bool{}
	failed := func(outcome string) {
		rec.FullTextFailed++
		c.m.fullText.WithLabelValues(outcome).Inc()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			return
		}
		host, err := polite.HostKey(it.URL)
		if err != nil || failedHosts[host] {
			failed("skipped")
			continue
		}
		if !c.opts.IgnoreRobots {
			ok, delay, err := c.robots.Allowed(ctx, c.fetcherUA(), it.URL)
			if delay > 0 {
				c.limiter.SetCrawlDelay(host, delay)
			}
			if !ok {
				if err != nil {
					failedHosts[host] = true
				}
				failed("disallowed")
				continue
			}
		}
		release, err := c.limiter.Acquire(ctx, host)
		if err != nil {
			return // shutting down
		}
		resp, err := c.fetcher.Fetch(ctx, fetch.Request{URL: it.URL})
		release()
		if err != nil {
			failedHosts[host] = true
			failed("error")
			continue
		}
		rec.Bytes += resp.Bytes
		final, _ := url.Parse(resp.FinalURL)
		text, err := fulltext.Extract(resp.Body, resp.ContentType, final, c.opts.FullText.MaxBytes)
		if err != nil {
			failed("no_text")
			continue
		}
		it.Content = asHTML(text)
		rec.FullText++
		c.m.fullText.WithLabelValues("ok").Inc()
	}
}

// asHTML turns extracted plain text into the HTML an item's Content holds:
// each paragraph escaped and in a <p>.
func asHTML(text string) string {
	var b strings.Builder
	for _, p := range strings.Split(text, "\n\n") {
		b.WriteString("<p>")
		b.WriteString(html.EscapeString(strings.ReplaceAll(p, "\n", " ")))
		b.WriteString("</p>")
	}
	return b.String()
}
