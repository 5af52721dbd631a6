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

func TestEventuallyEvery(t *testing.T) {
	const interval = 3 * Poll
	var at []time.Time
	took := EventuallyEvery(t, time.Second, interval, func() error {
		if at = append(at, time.Now()); len(at) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < interval {
			t.Fatalf("checks %d and %d %s apart, want at least %s", i-1, i, gap, interval)
		}
	}
	if took < 2*interval {
		t.Fatalf("took %s for three checks %s apart", took, interval)
	}
}
