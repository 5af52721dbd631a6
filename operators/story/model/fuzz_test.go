package model

import (
	"testing"
)

// FuzzDecode feeds model files to Decode: it must never panic, and a file
// it accepts must encode to a file it accepts again.
func FuzzDecode(f *testing.F) {
	f.Add(defaultFile)
	f.Add([]byte(`{"format":"newsflow-story-model","version":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		out, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(out); err != nil {
			t.Fatalf("re-encoded model refused: %v", err)
		}
	})
}

// FuzzExtract extracts features of arbitrary texts: no panic, and vectors
// of unit length or empty.
func FuzzExtract(f *testing.F) {
	f.Add("Bridge Party joins Halcroft coalition over trawler licences", "Lawmakers in Elwich vote on Monday; 5.5 percent.")
	f.Add("U.S. 'Day' — 12,000 km", "É\u0301 l'été’s\n\n")
	f.Fuzz(func(t *testing.T, title, body string) {
		x := NewExtractor()
		for range 2 {
			a := x.Extract(Doc{ID: "x", Title: title, Body: body})
			for sub, v := range a.vec {
				var n float64
				for _, e := range v {
					n += e.w * e.w
				}
				if len(v) > 0 && (n < 0.999 || n > 1.001) {
					t.Fatalf("sub-vector %d has squared length %v", sub, n)
				}
			}
		}
	})
}
