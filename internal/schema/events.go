// Package events defines the JSON events that enter newsflow (shares, reads)
// and their decoding and validation, shared by HTTP ingestion and the
// operators that consume the topics directly.
package schema

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Topics the events live on.
const (
	TopicShares = "shares"
	TopicReads  = "reads"
	// TopicTrendingChanges carries one record each time an article enters
	// a trending window's top K, keyed by article id, from the
	// trending-changes operator (operators/trending/changes.go) to every
	// node's live streams (query/stream).
	TopicTrendingChanges = "trending.changes"
)

// Limits on event size and field lengths.
const (
	MaxEventBytes = 8 << 10
	MaxIDBytes    = 128
	MaxLabelBytes = 64
)

// Share is one share of an article. Key on the log: ArticleID.
type Share struct {
	EventID   string `json:"event_id"`
	ArticleID string `json:"article_id"`
	UserID    string `json:"user_id"`
	ShareType string `json:"share_type,omitempty"`
	Category  string `json:"category,omitempty"`
	// Timestamp is the event time in milliseconds since the Unix epoch. In
	// JSON it is an integer of milliseconds or an RFC 3339 string.
	Timestamp int64 `json:"timestamp"`
}

// FieldError says what is wrong with one field of an event.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Reason) }

// ErrTooLarge is returned for events over MaxEventBytes.
var ErrTooLarge = fmt.Errorf("event larger than %d bytes", MaxEventBytes)

// DecodeShare parses and validates a share event. p is reused between calls
// and must not be shared between goroutines.
func DecodeShare(p *fastjson.Parser, data []byte) (Share, error) {
	var s Share
	o, err := object(p, data)
	if err != nil {
		return s, err
	}
	if s.EventID, err = str(o, "event_id", MaxIDBytes, true); err != nil {
		return s, err
	}
	if s.ArticleID, err = str(o, "article_id", MaxIDBytes, true); err != nil {
		return s, err
	}
	if s.UserID, err = str(o, "user_id", MaxIDBytes, true); err != nil {
		return s, err
	}
	if s.ShareType, err = str(o, "share_type", MaxLabelBytes, false); err != nil {
		return s, err
	}
	if s.Category, err = str(o, "category", MaxLabelBytes, false); err != nil {
		return s, err
	}
	if s.Timestamp, err = timestamp(o, "timestamp"); err != nil {
		return s, err
	}
	return s, nil
}

// ArticleIDOf extracts article_id from a share event without validating the
// rest, for routing records that carry no key.
func ArticleIDOf(p *fastjson.Parser, data []byte) (string, bool) {
	return stringField(p, data, "article_id")
}

// stringField extracts a non-empty string field of an event.
func stringField(p *fastjson.Parser, data []byte, field string) (string, bool) {
	if len(data) > MaxEventBytes {
		return "", false
	}
	v, err := p.ParseBytes(data)
	if err != nil {
		return "", false
	}
	b := v.GetStringBytes(field)
	if len(b) == 0 || len(b) > MaxIDBytes || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

func object(p *fastjson.Parser, data []byte) (*fastjson.Object, error) {
	if len(data) > MaxEventBytes {
		return nil, ErrTooLarge
	}
	v, err := p.ParseBytes(data)
	if err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	o, err := v.Object()
	if err != nil {
		return nil, errors.New("event is not a JSON object")
	}
	return o, nil
}

func str(o *fastjson.Object, field string, maxLen int, required bool) (string, error) {
	v := o.Get(field)
	if v == nil || v.Type() == fastjson.TypeNull {
		if required {
			return "", &FieldError{field, "missing"}
		}
		return "", nil
	}
	b, err := v.StringBytes()
	if err != nil {
		return "", &FieldError{field, "must be a string, got " + v.Type().String()}
	}
	switch {
	case required && len(b) == 0:
		return "", &FieldError{field, "must not be empty"}
	case len(b) > maxLen:
		return "", &FieldError{field, fmt.Sprintf("longer than %d bytes", maxLen)}
	case !utf8.Valid(b):
		return "", &FieldError{field, "not valid UTF-8"}
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return "", &FieldError{field, "contains control characters"}
		}
	}
	return string(b), nil
}

// Bounds on accepted timestamps: after 2000-01-01 and before 2100-01-01.
const (
	minTimestamp = 946684800000
	maxTimestamp = 4102444800000
)

func timestamp(o *fastjson.Object, field string) (int64, error) {
	v := o.Get(field)
	if v == nil || v.Type() == fastjson.TypeNull {
		return 0, &FieldError{field, "missing"}
	}
	var ms int64
	switch v.Type() {
	case fastjson.TypeNumber:
		n, err := v.Int64()
		if err != nil {
			return 0, &FieldError{field, "must be an integer number of milliseconds since the epoch"}
		}
		ms = n
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		t, err := time.Parse(time.RFC3339Nano, string(b))
		if err != nil {
			return 0, &FieldError{field, "not an RFC 3339 time"}
		}
		ms = t.UnixMilli()
	default:
		return 0, &FieldError{field, "must be milliseconds since the epoch or an RFC 3339 string, got " + v.Type().String()}
	}
	if ms < minTimestamp || ms >= maxTimestamp {
		return 0, &FieldError{field, "out of range (years 2000-2099)"}
	}
	return ms, nil
}

// CheckTime reports whether an event time ts is acceptable relative to a
// reference time ref (the ingestion clock, or the time of the log record
// that carries the event): not more than maxFuture after it and not more
// than maxPast before it.
func CheckTime(ts, ref int64, maxPast, maxFuture time.Duration) error {
	switch {
	case ts > ref+maxFuture.Milliseconds():
		return &FieldError{"timestamp", fmt.Sprintf("%s in the future (limit %s)", time.Duration(ts-ref)*time.Millisecond, maxFuture)}
	case ts < ref-maxPast.Milliseconds():
		return &FieldError{"timestamp", fmt.Sprintf("%s in the past (limit %s)", time.Duration(ref-ts)*time.Millisecond, maxPast)}
	}
	return nil
}
