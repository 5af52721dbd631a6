package polite

import "time"

// Clock is the source of time for the Limiter and Robots. Tests inject a fake;
// production uses SystemClock.
//
// Implementations must be safe for concurrent use. Now must not go backwards
// by more than the Limiter can tolerate (it only ever compares instants, so a
// backwards step merely delays requests). A Timer's channel receives at most
// one value, at or after the instant Now()+d; after Stop returns, no value is
// delivered.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// the timer (false if it had already fired or been stopped).
	Stop() bool
}

// SystemClock returns the Clock backed by package time.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
