package polite

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
	"github.com/newsflow/newsflow/internal/option"
)

// CircuitState is the state of a source's circuit breaker. The zero value is
// Closed. It reads and writes JSON as "closed", "open" or "half-open".
type CircuitState uint8

// Circuit states.
const (
	// Closed: requests flow; consecutive failures are counted.
	Closed CircuitState = iota
	// Open: no requests until OpenUntil.
	Open
	// HalfOpen: one trial request decides between Closed and Open.
	HalfOpen
)

var circuitStateNames = [...]string{Closed: "closed", Open: "open", HalfOpen: "half-open"}

// String implements fmt.Stringer.
func (s CircuitState) String() string {
	if int(s) < len(circuitStateNames) {
		return circuitStateNames[s]
	}
	return fmt.Sprintf("CircuitState(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s CircuitState) MarshalText() ([]byte, error) {
	if int(s) >= len(circuitStateNames) {
		return nil, fmt.Errorf("invalid circuit state %d", uint8(s))
	}
	return []byte(circuitStateNames[s]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *CircuitState) UnmarshalText(b []byte) error {
	for i, name := range circuitStateNames {
		if string(b) == name {
			*s = CircuitState(i)
			return nil
		}
	}
	return fmt.Errorf("invalid circuit state %q", b)
}

// BreakerOptions configures the circuit breaker transitions. The zero value of
// every field means its default (see DefaultBreakerOptions).
type BreakerOptions struct {
	// FailureThreshold is the number of consecutive failures that opens a
	// closed breaker (default 5).
	FailureThreshold int `json:"failure_threshold,omitempty"`
	// OpenFor is how long the breaker stays open the first time (default 5m).
	// Each failed half-open trial doubles it.
	OpenFor time.Duration `json:"open_for,omitempty"`
	// MaxOpenFor caps the open period (default 6h).
	MaxOpenFor time.Duration `json:"max_open_for,omitempty"`
	// Jitter is the fraction of the open period that is randomly taken off,
	// so that sources that failed together do not retry together (default
	// 0.2: the period is between 80% and 100% of its nominal length, never
	// above MaxOpenFor). A negative value means no jitter.
	Jitter float64 `json:"jitter,omitempty"`
}

// DefaultBreakerOptions returns the options with every default filled in.
func DefaultBreakerOptions() BreakerOptions {
	return BreakerOptions{
		FailureThreshold: 5,
		OpenFor:          5 * time.Minute,
		MaxOpenFor:       6 * time.Hour,
		Jitter:           0.2,
	}
}

// Validate reports options that are out of range. Zero values are valid:
// they mean the default.
func (o BreakerOptions) Validate() error {
	errs := []error{
		option.NotNegative("failure threshold", o.FailureThreshold),
		option.NotNegative("open for", o.OpenFor),
		option.NotNegative("max open for", o.MaxOpenFor),
	}
	if math.IsNaN(o.Jitter) || o.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter %v must be at most 1", o.Jitter))
	}
	if d := o.withDefaults(); d.MaxOpenFor < d.OpenFor {
		errs = append(errs, fmt.Errorf("max open for %v is below open for %v", d.MaxOpenFor, d.OpenFor))
	}
	return option.Join("breaker", errs...)
}

func (o BreakerOptions) withDefaults() BreakerOptions {
	d := DefaultBreakerOptions()
	d.MaxOpenFor = max(d.MaxOpenFor, o.OpenFor) // never below OpenFor
	option.Fill(&o, d)
	if o.Jitter < 0 {
		o.Jitter = 0 // no jitter
	}
	return o
}

// Limits of BreakerState.RateLimited and of half-open trials.
const (
	// DefaultRetryAfter is the hold after a 429 or 503 without a usable
	// Retry-After.
	DefaultRetryAfter = time.Minute
	// MaxRetryAfter caps the hold a server can ask for.
	MaxRetryAfter = 24 * time.Hour
	// TrialTimeout is how long a half-open trial may go unanswered (the
	// process died mid-fetch, or the outcome was never reported) before
	// Allow lets another trial through. It is far above any fetch timeout.
	TrialTimeout = 10 * time.Minute
)

// BreakerState is one source's circuit breaker. It is a plain value that the
// scheduler stores with the source (JSON) and updates with the outcome of
// every fetch; the transitions are pure functions of the state, the time
// passed in and, for jitter, rnd. The zero value is a closed breaker.
//
// Transitions:
//
//	closed    --Failure, count reaches FailureThreshold--> open (OpenFor)
//	open      --Allow at/after OpenUntil-----------------> half-open, trial let through
//	half-open --Success--------------------------------> closed (everything reset)
//	half-open --Failure--------------------------------> open again, period doubled (≤ MaxOpenFor)
//	any       --RateLimited----------------------------> same state, held until NotBefore
//
// A Success in closed state resets the failure count. Outcomes that arrive
// while open (requests let through before it opened) are late: a Success
// closes the breaker (the source works), a Failure is counted but does not
// extend the open period.
//
// BreakerState is not safe for concurrent use; the scheduler owns each
// source's state and serialises its updates.
//
// Its JSON writes the times in ms since the epoch and reads them in ms or
// RFC 3339, as earlier versions wrote them (jsontime.Millis).
type BreakerState struct {
	State CircuitState `json:"state"`
	// ConsecutiveFailures counts failures since the last success.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// OpenedAt is when the breaker last opened.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// OpenUntil is when an open breaker lets a trial through.
	OpenUntil time.Time `json:"open_until,omitzero"`
	// Reopens counts failed half-open trials since the breaker first opened;
	// the open period is OpenFor << Reopens.
	Reopens int `json:"reopens,omitempty"`
	// TrialAt is when the half-open trial in flight was let through; zero
	// when none is.
	TrialAt time.Time `json:"trial_at,omitzero"`
	// NotBefore holds all requests until then (429/503 Retry-After).
	NotBefore time.Time `json:"not_before,omitzero"`
}

// breakerJSON is BreakerState as JSON: its times in ms since the epoch.
type breakerJSON struct {
	breakerFields
	OpenedAt  jsontime.Millis `json:"opened_at,omitzero"`
	OpenUntil jsontime.Millis `json:"open_until,omitzero"`
	TrialAt   jsontime.Millis `json:"trial_at,omitzero"`
	NotBefore jsontime.Millis `json:"not_before,omitzero"`
}

// breakerFields is BreakerState without its JSON methods; breakerJSON's
// times stand for its own.
type breakerFields BreakerState

// MarshalJSON writes the breaker with its times in ms since the epoch.
func (b BreakerState) MarshalJSON() ([]byte, error) {
	return json.Marshal(breakerJSON{breakerFields(b),
		jsontime.Millis{Time: b.OpenedAt}, jsontime.Millis{Time: b.OpenUntil}, jsontime.Millis{Time: b.TrialAt}, jsontime.Millis{Time: b.NotBefore}})
}

// UnmarshalJSON reads the breaker with its times in ms or RFC 3339.
func (b *BreakerState) UnmarshalJSON(data []byte) error {
	j := breakerJSON{breakerFields(*b),
		jsontime.Millis{Time: b.OpenedAt}, jsontime.Millis{Time: b.OpenUntil}, jsontime.Millis{Time: b.TrialAt}, jsontime.Millis{Time: b.NotBefore}}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = BreakerState(j.breakerFields)
	b.OpenedAt, b.OpenUntil, b.TrialAt, b.NotBefore = j.OpenedAt.Time, j.OpenUntil.Time, j.TrialAt.Time, j.NotBefore.Time
	return nil
}

// Allow reports whether a request to the source may be sent at now. In
// half-open state it lets exactly one trial through (and records it), so call
// it only right before sending.
func (b *BreakerState) Allow(now time.Time) bool {
	if now.Before(b.NotBefore) {
		return false
	}
	switch b.State {
	case Open:
		if now.Before(b.OpenUntil) {
			return false
		}
		b.State = HalfOpen
		b.TrialAt = now
		return true
	case HalfOpen:
		if !b.TrialAt.IsZero() && now.Sub(b.TrialAt) < TrialTimeout {
			return false
		}
		b.TrialAt = now
		return true
	default:
		return true
	}
}

// Success records a successful fetch (including 304 Not Modified): the
// breaker closes and forgets past failures. A pending rate-limit hold stays.
func (b *BreakerState) Success(now time.Time) {
	hold := b.NotBefore
	*b = BreakerState{}
	if now.Before(hold) {
		b.NotBefore = hold
	}
}

// Failure records a failed fetch. rnd returns numbers in [0, 1) for jitter;
// nil uses math/rand/v2.
func (b *BreakerState) Failure(now time.Time, opts BreakerOptions, rnd func() float64) {
	opts = opts.withDefaults()
	b.ConsecutiveFailures++
	switch b.State {
	case Closed:
		if b.ConsecutiveFailures >= opts.FailureThreshold {
			b.open(now, opts, rnd)
		}
	case HalfOpen:
		b.Reopens++
		b.open(now, opts, rnd)
	case Open:
		// A late outcome; the open period stands.
	}
}

// RateLimited records a 429 or 503 answer: the server is up but asks us to
// slow down. It does not count as a failure; it holds requests for retryAfter
// (DefaultRetryAfter when not positive, at most MaxRetryAfter). A half-open
// trial that is answered so is over, and another is let through after the
// hold.
func (b *BreakerState) RateLimited(now time.Time, retryAfter time.Duration) {
	if retryAfter <= 0 {
		retryAfter = DefaultRetryAfter
	}
	retryAfter = min(retryAfter, MaxRetryAfter)
	if until := now.Add(retryAfter); until.After(b.NotBefore) {
		b.NotBefore = until
	}
	if b.State == HalfOpen {
		b.TrialAt = time.Time{}
	}
}

// NextAttempt is the earliest instant at which Allow may return true: the
// later of NotBefore and, when open, OpenUntil or, when a half-open trial is
// in flight, its timeout. A zero time means now.
func (b BreakerState) NextAttempt() time.Time {
	at := b.NotBefore
	switch {
	case b.State == Open && b.OpenUntil.After(at):
		at = b.OpenUntil
	case b.State == HalfOpen && !b.TrialAt.IsZero():
		if t := b.TrialAt.Add(TrialTimeout); t.After(at) {
			at = t
		}
	}
	return at
}

// OpenPeriod is the nominal (unjittered) open period after reopens failed
// trials: OpenFor doubled reopens times, capped at MaxOpenFor.
func OpenPeriod(reopens int, opts BreakerOptions) time.Duration {
	opts = opts.withDefaults()
	d := opts.OpenFor
	for i := 0; i < reopens && d < opts.MaxOpenFor; i++ {
		d *= 2
	}
	return min(d, opts.MaxOpenFor)
}

func (b *BreakerState) open(now time.Time, opts BreakerOptions, rnd func() float64) {
	d := OpenPeriod(b.Reopens, opts)
	if opts.Jitter > 0 {
		if rnd == nil {
			rnd = rand.Float64
		}
		r := min(max(rnd(), 0), 1)
		d -= time.Duration(float64(d) * opts.Jitter * r)
	}
	b.State = Open
	b.OpenedAt = now
	b.OpenUntil = now.Add(d)
	b.TrialAt = time.Time{}
}
