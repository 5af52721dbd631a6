package query

// IngestChunkRecords is the most records one append of a batch carries.
const IngestChunkRecords = ingestChunkRecords
