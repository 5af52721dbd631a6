package schema

import (
	"fmt"

	"github.com/valyala/fastjson"
)

// MaxDwell bounds dwell_ms: a read longer than a day is a broken client.
const MaxDwell = 24 * 60 * 60 * 1000

// Read is one reading of an article by a user. Key on the log: UserID.
type Read struct {
	EventID   string `json:"event_id"`
	UserID    string `json:"user_id"`
	ArticleID string `json:"article_id"`
	// SessionID groups the reads of one visit; repeats of (user, article,
	// session) count once. Optional.
	SessionID string `json:"session_id,omitempty"`
	// Timestamp is the event time in milliseconds since the Unix epoch. In
	// JSON it is an integer of milliseconds or an RFC 3339 string.
	Timestamp int64 `json:"timestamp"`
	// DwellMS is how long the article was open, if the client knows.
	DwellMS int64 `json:"dwell_ms,omitempty"`
}

// DecodeRead parses and validates a read event. p is reused between calls
// and must not be shared between goroutines.
func DecodeRead(p *fastjson.Parser, data []byte) (Read, error) {
	var r Read
	o, err := object(p, data)
	if err != nil {
		return r, err
	}
	if r.EventID, err = str(o, "event_id", MaxIDBytes, true); err != nil {
		return r, err
	}
	if r.UserID, err = str(o, "user_id", MaxIDBytes, true); err != nil {
		return r, err
	}
	if r.ArticleID, err = str(o, "article_id", MaxIDBytes, true); err != nil {
		return r, err
	}
	if r.SessionID, err = str(o, "session_id", MaxIDBytes, false); err != nil {
		return r, err
	}
	if r.Timestamp, err = timestamp(o, "timestamp"); err != nil {
		return r, err
	}
	if v := o.Get("dwell_ms"); v != nil && v.Type() != fastjson.TypeNull {
		n, err := v.Int64()
		if err != nil || n < 0 || n > MaxDwell {
			return r, &FieldError{"dwell_ms", fmt.Sprintf("must be an integer from 0 to %d", MaxDwell)}
		}
		r.DwellMS = n
	}
	return r, nil
}

// UserIDOf extracts user_id from a read event without validating the rest,
// for routing records that carry no key.
func UserIDOf(p *fastjson.Parser, data []byte) (string, bool) {
	return stringField(p, data, "user_id")
}
