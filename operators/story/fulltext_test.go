package story

import (
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/text"
)

// TestFullTextImprovesStories scores the ECB+ events twice through the
// builder: once as a one-line feed would give them (the first sentence as
// the title, no summary) and once with the article's text as the summary,
// cleaned and cut as the crawler does when it fetches a page for its full
// text. The story stage must use the text: full text scores far better
// (measured: B-cubed F1 0.656 from the line, 0.804 with the text).
func TestFullTextImprovesStories(t *testing.T) {
	docs := loadLabelled(t, "ecbplus_docs.jsonl")
	line := make([]labelled, 0, len(docs))
	full := make([]labelled, 0, len(docs))
	for _, d := range docs {
		var lines []string
		for _, l := range strings.Split(d.Body, "\n") {
			// ECB+ texts of the second event of each topic open with
			// their source's address; a feed item would not.
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "http") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			t.Fatalf("%s: no text", d.ID)
		}
		title := text.Clean(lines[0], feed.MaxTitleBytes)
		line = append(line, labelled{ID: d.ID, Story: d.Story, Title: title})
		full = append(full, labelled{ID: d.ID, Story: d.Story, Title: title,
			Body: text.Clean(strings.Join(lines[1:], "\n"), feed.MaxSummaryBytes)})
	}
	truth := truthOf(docs)
	sl := scoreBuilder(t, Options{}, line, truth)
	sf := scoreBuilder(t, Options{}, full, truth)
	t.Logf("ECB+ from the first sentence: B-cubed P %.3f R %.3f F1 %.3f; with the full text: P %.3f R %.3f F1 %.3f",
		sl.BCubedP, sl.BCubedR, sl.BCubedF1, sf.BCubedP, sf.BCubedR, sf.BCubedF1)
	if sf.BCubedF1 < sl.BCubedF1+0.1 || sf.BCubedF1 < 0.78 {
		t.Errorf("full text F1 %.3f against %.3f from the first sentence: want at least 0.1 better and ≥ 0.78", sf.BCubedF1, sl.BCubedF1)
	}
}
