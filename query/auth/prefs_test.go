package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
)

func many(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestPreferencesValidation(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "pref", "pref's password")
	for _, tc := range []struct {
		name string
		in   Preferences
		want Preferences // on success, without Updated
		err  string      // a part of the error naming the field
	}{
		{
			name: "empty",
			want: Preferences{Topics: []string{}, PreferredSources: []string{}, ExcludedSources: []string{}},
		},
		{
			name: "duplicates removed, order kept, spaces trimmed",
			in:   Preferences{Topics: []string{"tech", "world", "tech", " world ", "science"}, PreferredSources: []string{"src-b", "src-a", "src-b"}},
			want: Preferences{Topics: []string{"tech", "world", "science"}, PreferredSources: []string{"src-b", "src-a"}, ExcludedSources: []string{}},
		},
		{
			name: "50 entries and duplicates",
			in:   Preferences{ExcludedSources: append(many("s", 50), many("s", 50)...)},
			want: Preferences{Topics: []string{}, PreferredSources: []string{}, ExcludedSources: many("s", 50)},
		},
		{
			name: "128-byte multibyte entry",
			in:   Preferences{Topics: []string{strings.Repeat("ü", 64)}},
			want: Preferences{Topics: []string{strings.Repeat("ü", 64)}, PreferredSources: []string{}, ExcludedSources: []string{}},
		},
		{name: "51 topics", in: Preferences{Topics: many("t", 51)}, err: "topics has more than 50"},
		{name: "51 preferred", in: Preferences{PreferredSources: many("p", 51)}, err: "preferred_sources has more than 50"},
		{name: "51 excluded", in: Preferences{ExcludedSources: many("x", 51)}, err: "excluded_sources has more than 50"},
		{name: "empty entry", in: Preferences{PreferredSources: []string{"src-a", ""}}, err: "preferred_sources[1] is empty"},
		{name: "blank entry", in: Preferences{Topics: []string{" \t"}}, err: "topics[0] is empty"},
		{name: "long entry", in: Preferences{ExcludedSources: []string{strings.Repeat("x", 129)}}, err: "excluded_sources[0] is longer than 128 bytes"},
		{name: "invalid UTF-8", in: Preferences{Topics: []string{"ok", "bad\xff"}}, err: "topics[1] is not valid UTF-8"},
		{name: "control character", in: Preferences{Topics: []string{"a\nb"}}, err: "topics[0] contains a control character"},
		{
			name: "preferred and excluded",
			in:   Preferences{PreferredSources: []string{"src-a", "src-b"}, ExcludedSources: []string{"src-c", " src-b"}},
			err:  `source "src-b" is in both preferred_sources and excluded_sources`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.PutPreferences(ctx, u.ID, tc.in)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidPreferences) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PutPreferences = %v; want ErrInvalidPreferences with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Updated.Equal(e.clock.Now()) {
				t.Errorf("Updated %v", got.Updated)
			}
			got.Updated = jsontime.Millis{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PutPreferences = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestPreferencesRoundTrip(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "reader", "reader's password")
	p, err := e.GetPreferences(ctx, u.ID)
	if err != nil || !reflect.DeepEqual(p, Preferences{}) {
		t.Fatalf("GetPreferences before any = %#v, %v; want the zero value", p, err)
	}
	b, err := json.Marshal(p)
	if err != nil || string(b) != `{"topics":[],"preferred_sources":[],"excluded_sources":[]}` {
		t.Fatalf("zero preferences encode as %s, %v", b, err)
	}

	put, err := e.PutPreferences(ctx, u.ID, Preferences{Topics: []string{"politics"}, ExcludedSources: []string{"src-x"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.GetPreferences(ctx, u.ID)
	if err != nil || !reflect.DeepEqual(got.Topics, []string{"politics"}) || !reflect.DeepEqual(got.ExcludedSources, []string{"src-x"}) ||
		len(got.PreferredSources) != 0 || !got.Updated.Equal(put.Updated.Time) {
		t.Fatalf("GetPreferences = %#v, %v; put %#v", got, err, put)
	}
	b, err = json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"topics":["politics"],"preferred_sources":[],"excluded_sources":["src-x"],"updated_at":1772366400000}`
	if string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	var back Preferences
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Topics, got.Topics) || !back.Updated.Equal(got.Updated.Time) {
		t.Fatalf("decode %s = %#v, %v", b, back, err)
	}

	// A later put replaces everything.
	e.clock.Advance(time.Minute)
	if _, err := e.PutPreferences(ctx, u.ID, Preferences{PreferredSources: []string{"src-x"}}); err != nil {
		t.Fatal(err)
	}
	got, err = e.GetPreferences(ctx, u.ID)
	if err != nil || len(got.Topics) != 0 || len(got.ExcludedSources) != 0 || !reflect.DeepEqual(got.PreferredSources, []string{"src-x"}) ||
		!got.Updated.Equal(e.clock.Now()) {
		t.Fatalf("after replace: %#v, %v", got, err)
	}

	if _, err := e.PutPreferences(ctx, "u-000000000000000000000000", Preferences{}); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("PutPreferences(unknown user) = %v", err)
	}
	if p, err := e.GetPreferences(ctx, "garbage\x00"); err != nil || !reflect.DeepEqual(p, Preferences{}) {
		t.Errorf("GetPreferences(garbage) = %#v, %v", p, err)
	}
}
