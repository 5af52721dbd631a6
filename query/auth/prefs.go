package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/jsontime"
)

// Preferences steer a user's personalized feed.
type Preferences struct {
	Topics           []string `json:"topics"`
	PreferredSources []string `json:"preferred_sources"`
	ExcludedSources  []string `json:"excluded_sources"`
	// Updated is when they were last stored; zero (absent) if never.
	Updated jsontime.Millis `json:"updated_at,omitzero"`
}

// MarshalJSON writes absent lists as [] rather than null.
func (p Preferences) MarshalJSON() ([]byte, error) {
	type plain Preferences
	q := plain(p)
	for _, l := range []*[]string{&q.Topics, &q.PreferredSources, &q.ExcludedSources} {
		if *l == nil {
			*l = []string{}
		}
	}
	return json.Marshal(q)
}

// ErrInvalidPreferences is wrapped by PutPreferences' validation errors,
// which name the offending field.
var ErrInvalidPreferences = errors.New("invalid preferences")

// Limits of each list of Preferences.
const (
	MaxPreferenceEntries  = 50
	MaxPreferenceEntryLen = 128 // bytes
)

// normalize validates p and returns it with entries trimmed of surrounding
// white space and duplicates removed, in their first order.
func (p Preferences) normalize() (Preferences, error) {
	var (
		out Preferences
		err error
	)
	if out.Topics, err = cleanList("topics", p.Topics); err != nil {
		return Preferences{}, err
	}
	if out.PreferredSources, err = cleanList("preferred_sources", p.PreferredSources); err != nil {
		return Preferences{}, err
	}
	if out.ExcludedSources, err = cleanList("excluded_sources", p.ExcludedSources); err != nil {
		return Preferences{}, err
	}
	excluded := make(map[string]bool, len(out.ExcludedSources))
	for _, src := range out.ExcludedSources {
		excluded[src] = true
	}
	for _, src := range out.PreferredSources {
		if excluded[src] {
			return Preferences{}, fmt.Errorf("%w: source %q is in both preferred_sources and excluded_sources", ErrInvalidPreferences, src)
		}
	}
	return out, nil
}

func cleanList(field string, in []string) ([]string, error) {
	out := make([]string, 0, min(len(in), MaxPreferenceEntries))
	seen := make(map[string]bool, len(out))
	for i, v := range in {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
			return nil, fmt.Errorf("%w: %s[%d] is empty", ErrInvalidPreferences, field, i)
		case len(v) > MaxPreferenceEntryLen:
			return nil, fmt.Errorf("%w: %s[%d] is longer than %d bytes", ErrInvalidPreferences, field, i, MaxPreferenceEntryLen)
		case !utf8.ValidString(v):
			return nil, fmt.Errorf("%w: %s[%d] is not valid UTF-8", ErrInvalidPreferences, field, i)
		case strings.ContainsFunc(v, unicode.IsControl):
			return nil, fmt.Errorf("%w: %s[%d] contains a control character", ErrInvalidPreferences, field, i)
		}
		if seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
		if len(out) > MaxPreferenceEntries {
			return nil, fmt.Errorf("%w: %s has more than %d distinct entries", ErrInvalidPreferences, field, MaxPreferenceEntries)
		}
	}
	return out, nil
}

// GetPreferences returns a user's preferences: the zero value if they
// never stored any.
func (s *Store) GetPreferences(ctx context.Context, userID string) (Preferences, error) {
	var p Preferences
	if !validUserID(userID) {
		return p, nil
	}
	if _, err := s.getJSON(ctx, colPrefs, userID, &p); err != nil {
		return Preferences{}, err
	}
	return p, nil
}

// PutPreferences validates and replaces a user's preferences, and returns
// them as stored: entries trimmed of surrounding white space, duplicates
// removed in their first order, Updated set. Each list holds at most 50
// entries of 1 to 128 bytes of UTF-8 without control characters, and no
// source may be both preferred and excluded. Validation errors wrap
// ErrInvalidPreferences.
func (s *Store) PutPreferences(ctx context.Context, userID string, p Preferences) (Preferences, error) {
	p, err := p.normalize()
	if err != nil {
		return Preferences{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := found(s.getRecord(ctx, userID)); err != nil {
		return Preferences{}, err
	}
	p.Updated = s.stamp()
	if err := s.putJSON(ctx, colPrefs, userID, p); err != nil {
		return Preferences{}, err
	}
	return p, nil
}
