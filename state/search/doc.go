// Package search is the full-text index of articles: one Bleve index
// (scorch, on disk) per partition of the article stream.
//
// The partition's task is the only writer. It calls [Index.Apply] with a
// batch of upserts and deletes; Apply returns once the batch is durable, and
// only then does the task commit the input offsets the batch covers. A crash
// in between replays the batch, which is harmless: upserts replace by ID and
// deletes of missing IDs do nothing. When derived state is rebuilt by replay,
// the task [Destroy]s the index first.
//
// HTTP queries call [Index.Search] concurrently with the writer. A request
// with text is ranked by relevance (score descending, then ID ascending); a
// request without text lists the documents that pass its filters newest
// first (published time descending, then ID ascending). Both are total
// orders, so cursor pagination ([Result.Next], [Request.After]) neither
// repeats nor skips a document while the index does not change. A query fans
// out to every partition with the same cursor; [Merge] combines the
// partitions' pages into the global page and its cursor.
//
// Mapping: title, summary and content use Bleve's English analyzer
// (possessives, lower case, stop words, Porter stemming); title and summary
// are stored with term vectors for highlighting and phrase matching, content
// is indexed (truncated) but not stored; topics, source_id and story_id are
// keywords; published_at is a date with doc values for sorting; url and the
// source's display name are stored only.
//
// Durability: with scorch's default configuration (unsafe_batch off), Batch
// blocks until the persister has written and fsynced the new segment and
// committed and fsynced root.bolt; Apply then fsyncs the store directory,
// which scorch does not. A kill -9 or machine crash after Apply returns
// loses nothing; one during Apply loses at most that batch.
package search
