package readerapi

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestParseEntryQuery checks how a listing's query reads: the tighter of
// two time bounds, the defaults and caps of the page, and the message of a
// bad value.
func TestParseEntryQuery(t *testing.T) {
	parse := func(q string) (selection, entryPage, error) {
		var args fasthttp.Args
		args.Parse(q)
		var sel selection
		p, err := parseEntryQuery(&args, &sel)
		return sel, p, err
	}
	sel, p, err := parse("status=read&status=removed&after=10&published_after=20&before=100&published_before=50&limit=0&offset=3&order=id&direction=desc")
	if err != nil {
		t.Fatal(err)
	}
	if sel.status != "read" || sel.after != 20_000 || sel.before != 50_000 {
		t.Errorf("selection %+v", sel)
	}
	if want := (entryPage{limit: 100, offset: 3, order: "id", direction: "desc"}); p != want {
		t.Errorf("page %+v, want %+v", p, want)
	}
	if _, p, _ := parse("limit=999999999&after_entry_id=7"); p.limit != maxScan || p.afterID != 7 || p.order != "published_at" || p.direction != "asc" {
		t.Errorf("page %+v", p)
	}
	for q, want := range map[string]string{
		"status=gone":         "invalid entry status: gone",
		"starred=maybe":       "invalid starred value",
		"published_before=x":  "invalid published_before value",
		"limit=-1":            "invalid limit value",
		"offset=z":            "invalid offset value",
		"before_entry_id=q":   "invalid before_entry_id value",
		"order=title":         `invalid order, valid values are: "published_at", "id"`,
		"direction=up":        `invalid direction, valid values are: "asc", "desc"`,
		"limit=-1&starred=no": "invalid starred value", // the filters are read first
	} {
		if _, _, err := parse(q); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", q, err, want)
		}
	}
}
