package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/valyala/fasthttp"
)

// The image route: the proxy is query/images. In a cluster the story
// state lives on the owner of the story partition: a node that does not
// own it asks the owner for the URL of an id (the same path with
// ?resolve=1, between peers only), then fetches and caches the image
// itself.

// handleImage serves an image of the node's articles by id, through the
// proxy.
func (s *Server) handleImage(ctx *fasthttp.RequestCtx) {
	id, _ := ctx.UserValue("id").(string)
	if !story.ValidImageID(id) {
		writeError(ctx, fasthttp.StatusBadRequest, fmt.Sprintf("an image id is %d lower-case hex digits", story.ImageIDLen))
		return
	}
	if string(ctx.QueryArgs().Peek("resolve")) == "1" && s.fromPeer(ctx) {
		// A peer asks the story owner for the URL of an id.
		if u, ok := s.deps.Stories.ImageURL(id); ok {
			writeJSON(ctx, fasthttp.StatusOK, imageResolved{URL: u})
		} else {
			writeError(ctx, fasthttp.StatusNotFound, "no article has image "+id)
		}
		return
	}
	s.images.Serve(ctx, id, func() (string, bool, error) { return s.imageURL(id) })
}

// imageResolved answers a peer's ?resolve=1.
type imageResolved struct {
	URL string `json:"url"`
}

// imageURL looks up the URL of image id in the story state: here, or at
// the story writer's node while this node has no copy of it.
func (s *Server) imageURL(id string) (string, bool, error) {
	if s.storiesHere() {
		u, ok := s.deps.Stories.ImageURL(id)
		return u, ok, nil
	}
	var u string
	var found bool
	_, err := s.atOwner(s.storyPartition(), s.opts.PeerTimeout,
		func() error { u, found = s.deps.Stories.ImageURL(id); return nil },
		func(m cluster.Member, deadline time.Time) error {
			a := s.peerGet(m, story.ImagePathPrefix+id+"?resolve=1", HeaderRouted, nil, time.Until(deadline))
			if a.err == nil && a.status == fasthttp.StatusNotFound {
				found = false
				return nil
			}
			if err := a.failure(); err != nil {
				return err
			}
			var r imageResolved
			if err := json.Unmarshal(a.body, &r); err != nil || r.URL == "" {
				return fmt.Errorf("bad answer to an image lookup: %s", bytes.TrimSpace(a.body))
			}
			u, found = r.URL, true
			return nil
		})
	return u, found, err
}
