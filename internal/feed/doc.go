// Package feed turns a fetched feed body into raw articles.
//
// Parse accepts RSS 0.9x, 1.0 (RDF) and 2.0, Atom 1.0 (feed and entry
// documents) and JSON Feed 1.x. Formats are parsed by
// github.com/mmcdole/gofeed; this package prepares the bytes for it and maps
// its items to articles.
//
// # Preparing the body
//
// Real feeds lie about their encoding and contain bytes XML forbids, so the
// body is cleaned before any parser sees it:
//
//   - gzip data served without Content-Encoding is decompressed (at most
//     MaxDecompressedBytes).
//   - The character encoding is chosen from, in order: a byte order mark or
//     the UTF-16/UTF-32 byte pattern of a leading '<' or '{'; the body itself
//     when it is valid UTF-8 (mislabelled UTF-8 is common, legacy text that
//     happens to be valid UTF-8 is not); the encoding in the XML declaration;
//     the charset of the Content-Type; and finally UTF-8 with bad bytes
//     replaced when the body contains some valid multi-byte UTF-8, else
//     windows-1252. Labels are looked up with golang.org/x/net/html/charset
//     (so ISO-8859-1 means windows-1252, as browsers do). The declaration is
//     preferred to the header because servers often send a site-wide default
//     charset while the document describes itself.
//   - The text is converted to UTF-8, the XML declaration is rewritten to say
//     so, a leading byte order mark and whitespace are removed, and
//     characters XML 1.0 forbids (C0 controls other than tab, LF and CR;
//     U+FFFE; U+FFFF) are stripped.
//
// The format is then detected from the first element (or a leading '{').
// HTML pages, OPML lists and other documents are rejected with an error that
// matches ErrNotAFeed and says what the body looks like. Broken XML or JSON
// is reported with ErrMalformed, except that a truncated or damaged RSS or
// Atom document whose first items are intact is repaired: it is cut after
// the last complete item, the open elements are closed, and Feed.Repaired
// is set. JSON Feeds with fields of the wrong type are parsed after dropping
// those fields.
//
// # From items to articles
//
//   - URL: the item link, else its other links, else its GUID when the GUID
//     is an absolute http(s) URL, resolved against the feed URL (and
//     xml:base) and canonicalized with canon.Canonical. Items with no usable
//     link are skipped and counted in Feed.Skipped.
//   - Title: plain text (tags dropped, entities decoded, whitespace
//     collapsed, at most MaxTitleBytes). An item without one takes the first
//     words of its summary; with neither it is skipped. In all plain text,
//     double-encoded UTF-8 ("Ã©" for "é") and windows-1252 punctuation
//     stored as C1 controls are repaired.
//   - Summary: plain text of the description (of the content when there is
//     no description), at most MaxSummaryBytes.
//   - Content: the full content (content:encoded, Atom content, JSON
//     content_html or content_text) as given, at most MaxContentBytes, cut
//     at a rune boundary and never inside a tag.
//   - Author: the item's authors (in Atom, the feed's when the entry has
//     none), as plain text.
//   - ImageURL: the lead image, from the first source that has one:
//     media:content of an image medium or type (the widest), media:thumbnail
//     (also of a video's media:content), image enclosures, gofeed's item
//     image (iTunes image, JSON Feed image or banner_image), the first <img>
//     of the content, then of the description (data-src when src is a data:
//     placeholder). URLs resolve against the item's link; only http(s)
//     counts; images stated smaller than MinImageSide (tracking pixels),
//     SVGs and icons, and URLs that look like icons, avatars, logos, share
//     buttons, emoji or counters are passed over. "" when none is left.
//     ImageURL validates the same URLs for ingestion.
//   - PublishedAt: the published time, else the updated time, else the fetch
//     time. Times more than MaxFutureSkew after the fetch time become the
//     fetch time; times before 1970 count as missing. UpdatedAt is the
//     updated time or zero. All times are UTC.
//   - An item whose canonical URL already appeared in the same feed is
//     skipped as a duplicate; the first one wins.
//
// Everything returned is valid UTF-8.
package feed
