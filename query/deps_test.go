package query

import (
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/node/slo"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/state"
)

// The operators serve the server's interfaces.
var (
	_ Engine     = (*engine.Engine)(nil)
	_ Trending   = (*trending.Operator)(nil)
	_ Articles   = (*articles.Operator)(nil)
	_ Stories    = (*story.Operator)(nil)
	_ Search     = (*search.Operator)(nil)
	_ Interest   = (*interest.Operator)(nil)
	_ SLO        = (*slo.Evaluator)(nil)
	_ StateStore = (*state.DB)(nil)
)
