package testutil

import (
	"fmt"
	"os"
	"testing"
)

// DataRequiredEnv names the environment variable that turns a missing
// piece of the shared test data (or a tool needed to read it) from a skip
// into a failure: CI sets it to 1, as it always has the data.
const DataRequiredEnv = "NEWSFLOW_DATA_REQUIRED"

// NoSharedData ends tb because the shared data it reads (see
// ../shared/data/README.md) is not here: a skip with the message, or a
// failure if DataRequiredEnv is 1.
func NoSharedData(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(DataRequiredEnv) == "1" {
		tb.Fatalf("%s=1 and %s", DataRequiredEnv, msg)
		return
	}
	tb.Skip(msg)
}
