package testutil

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeTB records a failure instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	if len(args) > 1 {
		f.failed = args[1].(error).Error()
	}
	panic(f)
}

func TestEventually(t *testing.T) {
	calls := 0
	Eventually(t, time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
	f := &fakeTB{}
	func() {
		defer func() {
			if r := recover(); r != f {
				panic(r)
			}
		}()
		Eventually(f, 3*Poll, func() error { return errors.New("still not") })
	}()
	if !strings.Contains(f.failed, "still not") {
		t.Fatalf("failure %q does not give the last error", f.failed)
	}
}
