// Package auth keeps the accounts of the HTTP API: users and their roles,
// login sessions, reading preferences, and a limiter for login attempts.
// It has no HTTP handlers; package query serves it.
//
// # Storage
//
// [Store] keeps everything in a [meta.Store], values as JSON:
//
//	users                 user id → user record (with the bcrypt hash)
//	usernames             lower-case username → {"id": user id}
//	sessions              hex SHA-256 of the token → Session
//	user-sessions/<id>    hex SHA-256 of the token → {created_at, expires_at}
//	prefs                 user id → Preferences
//
// Times are written as ms since the epoch (jsontime.Millis); records
// that earlier versions wrote with RFC 3339 times load as well, and are
// written in ms when next changed.
//
// A session token is 32 random bytes, base64url-encoded; only its SHA-256
// is stored, so a copy of the store does not let anyone log in. Each user
// has a collection of their own that indexes their sessions, so revoking
// them all or counting them reads only that user's keys, and creating a
// session adds a key instead of rewriting a list.
//
// Passwords are hashed with bcrypt over an HMAC-SHA256 of the password,
// which lifts bcrypt's 72-byte limit and keeps unsalted SHA-256 hashes
// leaked elsewhere from being tested against ours.
//
// # Crash safety
//
// meta.Store writes keys one at a time, so multi-key updates are ordered
// to leave only harmless leftovers after a crash:
//
//   - A session's index entry is written before the session and deleted
//     after it: every live session is in its user's index, so RevokeAll is
//     complete. An index entry without a session is ignored and pruned.
//   - A username is claimed before the user record is written and released
//     after it is deleted. A username whose id has no user record (or a
//     record with another name) is stale and free to register again.
//   - DeleteUser revokes sessions and deletes preferences before the user
//     record, so a crash leaves a user that DeleteUser can delete again.
//
// # Concurrency
//
// Store and Limiter are safe for concurrent use. A Store serialises its
// writes with one mutex, which it never holds while hashing a password;
// reads (Lookup, Authenticate, GetUser, ...) take no lock. meta.Store has
// no compare-and-swap, so the uniqueness of usernames rests on that mutex:
// use one Store per metadata store in a process, and a replicated
// metadata store must apply account writes in one order from one writer
// (e.g. forward Register to the Raft leader), or two nodes could register
// the same name.
package auth
