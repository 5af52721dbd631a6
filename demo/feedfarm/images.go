package feedfarm

import (
	"bytes"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Lead images of the news world: with ArticlePages each news item carries
// an image enclosure, <farm>/image/<event>-<outlet>.png, a picture drawn
// from the event's topic and number (a gradient in the topic's colours
// with a band placed by the outlet), so the demo's reader shows cards with
// images, fetched through the node's image proxy like any outlet's.

// imageW and imageH are the size of a lead image (16:9).
const imageW, imageH = 480, 270

// topicColours are two colours per topic; other topics take the last.
var topicColours = map[string][2]color.RGBA{
	"world":         {{0x1d, 0x4e, 0x89, 0xff}, {0x6f, 0xa8, 0xdc, 0xff}},
	"politics":      {{0x7a, 0x1f, 0x2b, 0xff}, {0xd9, 0x7b, 0x66, 0xff}},
	"business":      {{0x0f, 0x5e, 0x4f, 0xff}, {0x8f, 0xd1, 0x9e, 0xff}},
	"technology":    {{0x3b, 0x2a, 0x7a, 0xff}, {0x9d, 0x8c, 0xf0, 0xff}},
	"science":       {{0x0b, 0x4f, 0x6c, 0xff}, {0x7f, 0xd8, 0xe6, 0xff}},
	"health":        {{0x8a, 0x2d, 0x5b, 0xff}, {0xf2, 0xa5, 0xc3, 0xff}},
	"sports":        {{0x8c, 0x4a, 0x0b, 0xff}, {0xf5, 0xc0, 0x6a, 0xff}},
	"entertainment": {{0x5c, 0x1f, 0x6e, 0xff}, {0xe0, 0x8f, 0xd9, 0xff}},
	"":              {{0x33, 0x3a, 0x45, 0xff}, {0xa7, 0xb1, 0xbf, 0xff}},
}

// imageURL is the image of outlet n's article about event k.
func imageURL(base string, k, n int) string {
	return strings.TrimSuffix(base, "/") + "/image/" + strconv.Itoa(k) + "-" + strconv.Itoa(n) + ".png"
}

// leadImage draws the image of event k (of topic) as outlet n shows it.
func leadImage(topic string, k, n int) []byte {
	cs, ok := topicColours[topic]
	if !ok {
		cs = topicColours[""]
	}
	h := fnv.New32a()
	h.Write([]byte(strconv.Itoa(k)))
	seed := h.Sum32()
	band := int(seed%uint32(imageH/2)) + imageH/4 + (n%3-1)*12
	img := image.NewRGBA(image.Rect(0, 0, imageW, imageH))
	mix := func(a, b uint8, t float64) uint8 { return uint8(float64(a)*(1-t) + float64(b)*t) }
	for y := range imageH {
		for x := range imageW {
			t := (float64(x)/imageW + float64(y)/imageH) / 2
			c := color.RGBA{mix(cs[0].R, cs[1].R, t), mix(cs[0].G, cs[1].G, t), mix(cs[0].B, cs[1].B, t), 0xff}
			if d := y - band - (x*int(seed%7))/40; d > -14 && d < 14 {
				c = color.RGBA{mix(c.R, 0xff, 0.35), mix(c.G, 0xff, 0.35), mix(c.B, 0xff, 0.35), 0xff}
			}
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img) // writing to memory does not fail
	return b.Bytes()
}

// serveImage serves /image/<event>-<outlet>.png of an event that has
// happened by now.
func (f *Farm) serveImage(w http.ResponseWriter, r *http.Request, name string) {
	ks, ns, ok := strings.Cut(strings.TrimSuffix(name, ".png"), "-")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	g := f.Generation()
	if !ok || !strings.HasSuffix(name, ".png") || err1 != nil || err2 != nil || k < 0 || k >= f.Events(g) || n < 0 || n >= f.opts.Outlets {
		http.NotFound(w, r)
		return
	}
	e := f.eventAt(k, f.times(g))
	serveBytes(w, r, leadImage(e.kind.topic, k, n), "image/png", time.Unix(0, 0))
}
