// Package searchindex is the full-text index of articles: one Bleve index
// (scorch, on disk) per partition of the article stream.
//
// # Writing
//
// The partition's task is the only writer. It calls [Index.Apply] with a
// batch of upserts and deletes; Apply returns once the batch is durable, and
// only then does the task commit the input offsets the batch covers. A crash
// in between replays the batch, which is harmless: upserts replace by ID and
// deletes of missing IDs do nothing. When derived state is rebuilt by replay,
// the task [Destroy]s the index first.
//
// Every Apply pays a fixed cost (a new segment, fsyncs, and merging the
// small segments later), about 5 ms of CPU: apply batches of a thousand
// documents or more (or whatever arrived in the last 100–200 ms), not one
// document at a time.
//
// Durability: with scorch's default configuration (unsafe_batch off), Batch
// blocks until the persister has written and fsynced the new segment and
// committed and fsynced root.bolt; Apply then fsyncs the store directory,
// which scorch does not. A kill -9 or machine crash after Apply returns
// loses nothing; one during Apply loses at most that batch, never part of
// it (TestCrash kills a writer with SIGKILL to check this).
//
// # Reading
//
// HTTP queries call [Index.Search] concurrently with the writer. A request
// with text matches the documents that have all its terms (after analysis;
// [Options.AnyTerm]: any of them), each in the title, summary or content,
// and ranks them by relevance (score descending, then ID ascending): Bleve's
// TF-IDF with title matches counted three times and a bonus for the whole
// text as a phrase in the title. Filters (topic, source, time) select
// without changing scores. A request without text lists the documents that
// pass its filters newest first (published time descending, then ID
// ascending). Both are total orders, so cursor pagination ([Result.Next],
// [Request.After]) neither repeats nor skips a document while the index does
// not change. Newest-first pages continue with Bleve's SearchAfter;
// relevance pages compare the cursor's exact float64 score and load
// document IDs only for hits that can make the page. A query fans out to
// every partition with the same cursor; [Merge] combines the partitions'
// pages into the global page and its cursor.
//
// Relevance pages are found without scoring every match (see topk.go):
// the matching documents and the exact total come from the segments'
// postings bitmaps (terms' fields OR'ed, terms AND'ed, filters AND'ed:
// topic and source by their terms, the time range by the hour field's
// prefix terms and, in partial hours, the exact time), and the documents
// are visited in classes by the fields each term matched, best score bound
// first, until a class's bound falls short of the page. Scores are Bleve's
// TF-IDF computed operation for operation as Bleve's searchers compute
// them, so pages, scores and cursors are those Bleve's own search returns
// (which remains the path for queries of more than eight terms); a common
// word on a million documents costs a few milliseconds instead of tens.
//
// Newest-first requests search a window of recent hours first and widen it
// until it holds a page, so their cost follows the page, not the index size.
//
// # Mapping
//
// Title, summary and content use Bleve's English analyzer (possessives,
// lower case, stop words, Porter stemming). Title and summary are stored;
// only the title keeps term vectors, for the phrase boost. Highlights are
// made by analyzing the stored title and summary of each hit again, which
// costs far less than term vectors on every summary. Content is indexed
// (truncated to [Options.MaxContentBytes]) but not stored. Topics, source_id
// and story_id are keywords; url, the source's display name and, for an
// article indexed while traced, its traceparent are stored only. The published time is kept twice: as a 16-hex-digit sortable key
// (one term, with doc values, for sorting and cursors) and truncated to the
// hour as a Bleve date (for range filters; a full-precision Bleve date has
// 16 mostly unique terms per document and cost a third of the indexing
// time). Range bounds that fall inside an hour are checked exactly against
// the sortable key.
package searchindex
