package model

import (
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
)

const uciPath = "../../../../shared/data/clustering/uci_dev.ndjson"

func noData(t testing.TB, err error) {
	t.Helper()
	testutil.NoSharedData(t, "shared data not available (%v); skipping", err)
}
