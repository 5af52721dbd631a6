package story

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/valyala/fastjson"
)

// storyInput is what the stories task reads of an article record
// (schema.ProcessedArticle): the article's fields the story stage keeps,
// and its features. The content, author and fetch time are skipped, and
// so are features of another version or malformed ones: the builder
// computes those.
type storyInput struct {
	Article
	// features are the record's, or nil; they refer to the decoder until
	// its next decode.
	features *features.Doc
	// forward is the record to pass on to articles.indexed: the record
	// without its features (see withoutFeatures).
	forward []byte
}

// inputDecoder decodes article records for the stories task, reusing its
// buffers between records.
//
// It reads a record as encoding/json reads it into a struct (keys matched
// exactly, else without regard to case; a later key wins; null leaves a
// field as it was; a value of the wrong type makes the record malformed;
// invalid UTF-8 in a string becomes U+FFFD), but with fastjson, which scans
// the strings it skips (the content) for their closing quote only. fastjson
// is more lenient than encoding/json with some malformed JSON (a raw
// control character in a string, an invalid escape, NaN), which JSON
// encoders, and so newsflow's, never write.
type inputDecoder struct {
	p   fastjson.Parser
	fd  features.Decoder
	doc features.Doc
}

var inputDecoders = sync.Pool{New: func() any { return new(inputDecoder) }}

// The fields of an article record the stories task reads, by JSON name.
const (
	fieldNone = iota
	fieldID
	fieldURL
	fieldSourceID
	fieldSource
	fieldAuthority
	fieldTitle
	fieldSummary
	fieldImageURL
	fieldTopics
	fieldPublishedAt
	fieldVersion
	fieldFirstSeen
)

var fieldNames = [...]string{
	fieldID: "id", fieldURL: "url", fieldSourceID: "source_id", fieldSource: "source",
	fieldAuthority: "authority", fieldTitle: "title", fieldSummary: "summary", fieldImageURL: "image_url",
	fieldTopics: "topics", fieldPublishedAt: "published_at", fieldVersion: "version", fieldFirstSeen: "first_seen",
}

// inputField returns the field a key names, or fieldNone.
func inputField(k []byte) int {
	switch string(k) {
	case "id":
		return fieldID
	case "url":
		return fieldURL
	case "source_id":
		return fieldSourceID
	case "source":
		return fieldSource
	case "authority":
		return fieldAuthority
	case "title":
		return fieldTitle
	case "summary":
		return fieldSummary
	case "image_url":
		return fieldImageURL
	case "topics":
		return fieldTopics
	case "published_at":
		return fieldPublishedAt
	case "version":
		return fieldVersion
	case "first_seen":
		return fieldFirstSeen
	case "content", "author", "fetched_at", "features":
		return fieldNone
	}
	for f, name := range fieldNames {
		if name != "" && bytes.EqualFold(k, []byte(name)) {
			return f
		}
	}
	return fieldNone
}

// decode reads an article record. It fails, with the reason, for a record
// that is not JSON of an article or has no id or title.
func (d *inputDecoder) decode(data []byte) (storyInput, error) {
	var in storyInput
	v, err := d.p.ParseBytes(data)
	if err != nil {
		return in, fmt.Errorf("malformed JSON: %v", err)
	}
	switch v.Type() {
	case fastjson.TypeObject:
	case fastjson.TypeNull:
		return in, errors.New("missing id or title")
	default:
		return in, fmt.Errorf("malformed JSON: an article is an object, not %s", v.Type())
	}
	o, _ := v.Object()
	var bad error
	o.Visit(func(k []byte, v *fastjson.Value) {
		f := inputField(k)
		if f == fieldNone || bad != nil {
			return
		}
		if err := in.set(f, v); err != nil {
			bad = fmt.Errorf("malformed JSON: %s: %w", fieldNames[f], err)
		}
	})
	if bad != nil {
		return in, bad
	}
	if in.ID == "" || in.Title == "" {
		return in, errors.New("missing id or title")
	}
	in.forward = data
	if fv := o.Get("features"); fv != nil {
		in.features = d.features(fv, in.Title, in.Summary)
		in.forward = withoutFeatures(data)
	}
	return in, nil
}

// featuresKey starts the features member of a record as encoding/json
// writes schema.ProcessedArticle: last, after the article's fields. The
// bytes cannot occur inside a JSON string, where quotes are escaped.
var featuresKey = []byte(`,"features":`)

// withoutFeatures returns a copy of the article record data without its
// features, which only the stories task reads, when they are the last
// member of the record and an object without nested objects or braces in
// strings (as the articles operator writes them); else data itself.
func withoutFeatures(data []byte) []byte {
	// The features object opens at the last '{' and closes before the
	// record's closing brace, at the end.
	j := bytes.LastIndexByte(data, '{')
	i := j - len(featuresKey)
	if i < 0 || !bytes.Equal(data[i:j], featuresKey) || !bytes.HasSuffix(data, []byte("}}")) ||
		bytes.IndexByte(data[j+1:len(data)-2], '}') >= 0 {
		return data
	}
	out := make([]byte, 0, i+1)
	out = append(out, data[:i]...)
	return append(out, '}')
}

var errType = errors.New("wrong type")

// set sets field f from v.
func (a *storyInput) set(f int, v *fastjson.Value) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	var err error
	switch f {
	case fieldID:
		err = setString(&a.ID, v)
	case fieldURL:
		err = setString(&a.URL, v)
	case fieldSourceID:
		err = setString(&a.SourceID, v)
	case fieldSource:
		err = setString(&a.Source, v)
	case fieldAuthority:
		a.Authority, err = v.Float64()
	case fieldTitle:
		err = setString(&a.Title, v)
	case fieldSummary:
		err = setString(&a.Summary, v)
	case fieldImageURL:
		err = setString(&a.ImageURL, v)
	case fieldTopics:
		a.Topics, err = labels(v)
	case fieldPublishedAt:
		a.Published, err = v.Int64()
	case fieldVersion:
		a.Version, err = v.Int()
	case fieldFirstSeen:
		a.FirstSeen, err = v.Int64()
	}
	return err
}

func setString(dst *string, v *fastjson.Value) error {
	b, err := v.StringBytes()
	if err != nil {
		return errType
	}
	*dst = validString(b)
	return nil
}

// validString returns b as a string with each byte of invalid UTF-8
// replaced by U+FFFD, as encoding/json decodes it.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return string(out)
}

// labels reads a list of topic labels.
func labels(v *fastjson.Value) ([]Label, error) {
	arr, err := v.Array()
	if err != nil {
		return nil, errType
	}
	out := make([]Label, len(arr))
	for i, e := range arr {
		if e.Type() == fastjson.TypeNull {
			continue
		}
		o, err := e.Object()
		if err != nil {
			return nil, errType
		}
		var bad error
		o.Visit(func(k []byte, v *fastjson.Value) {
			if bad != nil || v.Type() == fastjson.TypeNull {
				return
			}
			switch {
			case string(k) == "topic" || bytes.EqualFold(k, []byte("topic")):
				bad = setString(&out[i].Topic, v)
			case string(k) == "confidence" || bytes.EqualFold(k, []byte("confidence")):
				c, err := v.Float64()
				if err != nil {
					bad = errType
				}
				out[i].Confidence = c
			}
		})
		if bad != nil {
			return nil, bad
		}
	}
	return out, nil
}

// features decodes the features of an article record, or returns nil for
// features of another version or malformed ones.
func (d *inputDecoder) features(v *fastjson.Value, title, summary string) *features.Doc {
	o, err := v.Object()
	if err != nil {
		return nil
	}
	version := -1
	var simhash, minhash, terms []byte
	ok := true
	o.Visit(func(k []byte, v *fastjson.Value) {
		var err error
		switch string(k) {
		case "v":
			version, err = v.Int()
		case "simhash":
			simhash, err = v.StringBytes()
		case "minhash":
			minhash, err = v.StringBytes()
		case "terms":
			terms, err = v.StringBytes()
		}
		ok = ok && err == nil
	})
	if !ok {
		return nil
	}
	if d.doc, ok = d.fd.Decode(version, simhash, minhash, terms, title, summary); !ok {
		return nil
	}
	return &d.doc
}
