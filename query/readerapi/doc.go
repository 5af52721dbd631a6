// Package readerapi serves the APIs that existing reader apps speak, so
// that they can sync with newsflow as they do with Miniflux or FreshRSS:
// the Miniflux v1 API (miniflux.go, miniflux_entries.go) and the Google
// Reader API with its Atom streams (greader.go).
// Both expose one reader's subscriptions, folders, articles as entries,
// and their read and starred state: the model the web reader shares
// (operators/readstate). Apps authenticate with the reader's API keys
// (query/auth), never the login password: Miniflux clients send one as
// X-Auth-Token, or as the password of HTTP Basic auth with the username;
// Google Reader clients as the Passwd of ClientLogin.
//
// Numbers: a Miniflux id is an integer. A feed is numbered once per source
// (readstate.FeedNum), a category is the reader's folder id, and the user
// id is derived from the user's (userNum).
package readerapi
