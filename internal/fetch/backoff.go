package fetch

import (
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before retry number attempt (0 for the
// first retry) of a failing source: exponential backoff with equal jitter.
//
// The ceiling is c = min(max, base·2^attempt); the result is drawn uniformly
// from [c/2, c). Equal jitter (rather than full jitter, which draws from
// [0, c)) keeps at least half of the exponential delay, so a failing feed is
// never retried almost at once, while the random half still spreads out
// sources that failed together (a host outage) so that they do not retry in
// lockstep.
//
// A max <= 0 means no ceiling other than the largest time.Duration. A base
// <= 0 or an attempt < 0 returns 0. rnd returns values in [0, 1); nil means
// math/rand/v2.Float64. Values outside [0, 1) are clamped.
func Backoff(attempt int, base, max time.Duration, rnd func() float64) time.Duration {
	if base <= 0 || attempt < 0 {
		return 0
	}
	if max <= 0 {
		max = time.Duration(1<<63 - 1)
	}
	c := base
	for i := 0; i < attempt && c < max; i++ {
		if c > max/2 {
			c = max
			break
		}
		c *= 2
	}
	c = min(c, max)
	if rnd == nil {
		rnd = rand.Float64
	}
	r := rnd()
	if !(r >= 0) { // also catches NaN
		r = 0
	}
	if r >= 1 {
		r = 0.9999999999
	}
	half := c / 2
	return half + time.Duration(r*float64(c-half))
}
