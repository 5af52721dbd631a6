package query

import (
	"errors"

	"github.com/newsflow/newsflow/engine"
	"github.com/valyala/fasthttp"
)

// stageView is one stage as GET /api/v1/admin/stages shows it: what this
// node does for it and its lag here.
type stageView struct {
	engine.StageState
	RestoringForMS int64 `json:"restoring_for_ms"`
	Lag            int64 `json:"lag"`
}

// handleStages answers GET /api/v1/admin/stages: every stage of the
// topology with its tasks on this node, whether it is paused here and its
// lag.
func (s *Server) handleStages(ctx *fasthttp.RequestCtx) {
	prog := s.stageProgress()
	states := s.deps.Engine.StageStates()
	out := make([]stageView, 0, len(states))
	for _, st := range states {
		out = append(out, stageView{StageState: st, RestoringForMS: st.RestoringFor.Milliseconds(), Lag: prog[st.Stage].Lag})
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"stages": out})
}

// handlePauseStage answers POST /api/v1/admin/stages/{stage}/pause and
// .../resume: the stage's tasks on this node commit what they applied and
// wait, or go on. Pausing holds a stage for maintenance or to relieve a
// downstream dependency; its lag grows meanwhile.
func (s *Server) handlePauseStage(pause bool) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		name, _ := ctx.UserValue("stage").(string)
		op := s.deps.Engine.Resume
		if pause {
			op = s.deps.Engine.Pause
		}
		switch err := op(name); {
		case errors.Is(err, engine.ErrUnknownStage):
			writeError(ctx, fasthttp.StatusNotFound, "no stage "+name+" (GET /api/v1/admin/stages lists them)")
		case err != nil:
			writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		default:
			writeJSON(ctx, fasthttp.StatusOK, map[string]any{"stage": name, "paused": pause})
		}
	}
}
