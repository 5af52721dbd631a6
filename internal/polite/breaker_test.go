package polite

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// half always returns 0.5: with the default jitter (0.2) an open period is
// 90% of its nominal length.
func half() float64 { return 0.5 }

// step is one call on a BreakerState and the state expected after it.
type step struct {
	op    string // allow, deny (Allow returning false), success, failure, limited
	at    time.Duration
	arg   time.Duration // retryAfter for limited
	state CircuitState
	fails int
	until time.Duration // OpenUntil relative to t0, -1 to skip the check
}

func runSteps(t *testing.T, opts BreakerOptions, b BreakerState, steps []step) BreakerState {
	t.Helper()
	for i, s := range steps {
		now := at(s.at)
		switch s.op {
		case "allow", "deny":
			if got := b.Allow(now); got != (s.op == "allow") {
				t.Fatalf("step %d (%s at %v): Allow = %v", i, s.op, s.at, got)
			}
		case "success":
			b.Success(now)
		case "failure":
			b.Failure(now, opts, half)
		case "limited":
			b.RateLimited(now, s.arg)
		default:
			t.Fatalf("bad op %q", s.op)
		}
		if b.State != s.state || b.ConsecutiveFailures != s.fails {
			t.Fatalf("step %d (%s at %v): state %v, %d failures; want %v, %d (%+v)", i, s.op, s.at, b.State, b.ConsecutiveFailures, s.state, s.fails, b)
		}
		if s.until >= 0 && s.state == Open && !b.OpenUntil.Equal(at(s.until)) {
			t.Fatalf("step %d (%s at %v): open until +%v, want +%v", i, s.op, s.at, b.OpenUntil.Sub(t0), s.until)
		}
	}
	return b
}

func TestBreakerTransitions(t *testing.T) {
	m, s := time.Minute, time.Second
	opts := BreakerOptions{FailureThreshold: 3, OpenFor: 10 * m, MaxOpenFor: 60 * m}
	// opened is the three failures at t0 that open the breaker until +9m,
	// then steps.
	opened := func(steps []step) []step {
		return append([]step{
			{op: "failure", state: Closed, fails: 1},
			{op: "failure", state: Closed, fails: 2},
			{op: "failure", state: Open, fails: 3, until: 9 * m},
		}, steps...)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"closed allows", []step{
			{op: "allow", state: Closed},
		}},
		{"success resets the count", []step{
			{op: "failure", state: Closed, fails: 1},
			{op: "failure", state: Closed, fails: 2},
			{op: "success", state: Closed, fails: 0},
			{op: "failure", state: Closed, fails: 1},
			{op: "allow", state: Closed, fails: 1},
		}},
		{"threshold opens, with jitter", []step{
			{op: "failure", state: Closed, fails: 1},
			{op: "failure", state: Closed, fails: 2},
			{op: "failure", at: 5 * s, state: Open, fails: 3, until: 5*s + 9*m}, // 10m - 20%*0.5
			{op: "deny", at: 5*s + 9*m - 1, state: Open, fails: 3, until: -1},
		}},
		{"open to half-open lets one trial through", opened([]step{
			{op: "allow", at: 9 * m, state: HalfOpen, fails: 3},
			{op: "deny", at: 9*m + s, state: HalfOpen, fails: 3},
			{op: "deny", at: 9*m + TrialTimeout - 1, state: HalfOpen, fails: 3},
		})},
		{"half-open success closes", opened([]step{
			{op: "allow", at: 10 * m, state: HalfOpen, fails: 3},
			{op: "success", at: 10 * m, state: Closed, fails: 0},
			{op: "allow", at: 10 * m, state: Closed},
			// Counting starts over, and so does the backoff.
			{op: "failure", at: 11 * m, state: Closed, fails: 1},
			{op: "failure", at: 11 * m, state: Closed, fails: 2},
			{op: "failure", at: 11 * m, state: Open, fails: 3, until: 20 * m},
		})},
		{"half-open failure reopens for twice as long, capped", opened([]step{
			{op: "allow", at: 9 * m, state: HalfOpen, fails: 3},
			{op: "failure", at: 9 * m, state: Open, fails: 4, until: 27 * m}, // +20m*0.9
			{op: "allow", at: 27 * m, state: HalfOpen, fails: 4},
			{op: "failure", at: 27 * m, state: Open, fails: 5, until: 63 * m}, // +40m*0.9
			{op: "allow", at: 63 * m, state: HalfOpen, fails: 5},
			{op: "failure", at: 63 * m, state: Open, fails: 6, until: 117 * m}, // +60m*0.9 (cap)
			{op: "allow", at: 117 * m, state: HalfOpen, fails: 6},
			{op: "failure", at: 117 * m, state: Open, fails: 7, until: 171 * m}, // still capped
		})},
		{"lost trial: another after TrialTimeout", opened([]step{
			{op: "allow", at: 9 * m, state: HalfOpen, fails: 3},
			{op: "allow", at: 9*m + TrialTimeout, state: HalfOpen, fails: 3},
			{op: "deny", at: 9*m + TrialTimeout + s, state: HalfOpen, fails: 3},
		})},
		{"late outcomes while open", opened([]step{
			{op: "failure", at: m, state: Open, fails: 4, until: 9 * m}, // not extended
			{op: "success", at: 2 * m, state: Closed, fails: 0},
			{op: "allow", at: 2 * m, state: Closed},
		})},
		{"rate limited does not count and holds", []step{
			{op: "failure", state: Closed, fails: 1},
			{op: "failure", state: Closed, fails: 2},
			{op: "limited", arg: 30 * s, state: Closed, fails: 2},
			{op: "limited", state: Closed, fails: 2}, // DefaultRetryAfter (1m)
			{op: "limited", arg: 10 * s, state: Closed, fails: 2},
			{op: "deny", at: m - 1, state: Closed, fails: 2},
			{op: "allow", at: m, state: Closed, fails: 2},
		}},
		{"rate limited many times never opens", []step{
			{op: "limited", arg: s, state: Closed},
			{op: "limited", at: s, arg: s, state: Closed},
			{op: "limited", at: 2 * s, arg: s, state: Closed},
			{op: "limited", at: 3 * s, arg: s, state: Closed},
			{op: "limited", at: 4 * s, arg: s, state: Closed},
			{op: "limited", at: 5 * s, arg: s, state: Closed},
			{op: "allow", at: 6 * s, state: Closed},
		}},
		{"rate limited trial ends the trial without reopening", opened([]step{
			{op: "allow", at: 9 * m, state: HalfOpen, fails: 3},
			{op: "limited", at: 9 * m, arg: 2 * m, state: HalfOpen, fails: 3},
			{op: "deny", at: 11*m - 1, state: HalfOpen, fails: 3},
			{op: "allow", at: 11 * m, state: HalfOpen, fails: 3},
			{op: "deny", at: 11 * m, state: HalfOpen, fails: 3},
			{op: "success", at: 11 * m, state: Closed},
		})},
		{"retry-after capped", []step{
			{op: "limited", arg: 1000 * time.Hour, state: Closed},
			{op: "allow", at: MaxRetryAfter, state: Closed},
		}},
		{"success keeps a pending hold", []step{
			{op: "limited", arg: 5 * m, state: Closed},
			{op: "success", at: m, state: Closed},
			{op: "deny", at: 2 * m, state: Closed},
			{op: "allow", at: 5 * m, state: Closed},
		}},
		{"hold applies to an open breaker too", opened([]step{
			{op: "limited", at: m, arg: 20 * m, state: Open, fails: 3, until: 9 * m},
			{op: "deny", at: 20 * m, state: Open, fails: 3, until: 9 * m},
			{op: "allow", at: 21 * m, state: HalfOpen, fails: 3},
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, opts, BreakerState{}, tc.steps)
		})
	}
}

func TestBreakerDefaults(t *testing.T) {
	var b BreakerState
	for i := range 4 {
		b.Failure(at(0), BreakerOptions{}, half)
		if b.State != Closed {
			t.Fatalf("open after %d failures", i+1)
		}
	}
	b.Failure(at(0), BreakerOptions{}, half)
	if b.State != Open || b.OpenUntil != at(4*time.Minute+30*time.Second) {
		t.Fatalf("after 5 failures: %+v, want open for 4m30s (5m - 10%%)", b)
	}
	if got := b.NextAttempt(); got != b.OpenUntil {
		t.Fatalf("NextAttempt %v, want OpenUntil", got)
	}
}

func TestBreakerJitter(t *testing.T) {
	opts := BreakerOptions{FailureThreshold: 1, OpenFor: 100 * time.Minute, MaxOpenFor: 100 * time.Minute, Jitter: 0.3}
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{
		{0, 100 * time.Minute},
		{0.5, 85 * time.Minute},
		{0.999999, 70*time.Minute + 2*time.Millisecond},
		{7, 70 * time.Minute}, // out-of-range rnd clamped
	} {
		var b BreakerState
		b.Failure(t0, opts, func() float64 { return tc.r })
		if got := b.OpenUntil.Sub(t0).Round(time.Millisecond); got != tc.want {
			t.Errorf("rnd %v: open for %v, want %v", tc.r, got, tc.want)
		}
	}
	var b BreakerState
	b.Failure(t0, BreakerOptions{FailureThreshold: 1, Jitter: -1}, half)
	if got := b.OpenUntil.Sub(t0); got != 5*time.Minute {
		t.Errorf("no jitter: open for %v, want 5m", got)
	}
	// The default random source stays within bounds.
	for range 100 {
		var b BreakerState
		b.Failure(t0, BreakerOptions{FailureThreshold: 1}, nil)
		if d := b.OpenUntil.Sub(t0); d < 4*time.Minute || d > 5*time.Minute {
			t.Fatalf("open for %v, outside [4m, 5m]", d)
		}
	}
}

func TestOpenPeriod(t *testing.T) {
	opts := BreakerOptions{OpenFor: 5 * time.Minute, MaxOpenFor: 6 * time.Hour}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 360, 360}
	for i, w := range want {
		if got := OpenPeriod(i, opts); got != w*time.Minute {
			t.Errorf("OpenPeriod(%d) = %v, want %v", i, got, w*time.Minute)
		}
	}
	if got := OpenPeriod(math.MaxInt, opts); got != 6*time.Hour {
		t.Errorf("OpenPeriod(MaxInt) = %v", got)
	}
}

func TestBreakerNextAttempt(t *testing.T) {
	var b BreakerState
	if !b.NextAttempt().IsZero() {
		t.Fatalf("closed breaker: NextAttempt %v", b.NextAttempt())
	}
	b.RateLimited(t0, time.Minute)
	if got := b.NextAttempt(); got != at(time.Minute) {
		t.Fatalf("held: NextAttempt %v", got)
	}
	b = BreakerState{}
	b.Failure(t0, BreakerOptions{FailureThreshold: 1, Jitter: -1}, nil)
	b.Allow(at(5 * time.Minute))
	if got := b.NextAttempt(); got != at(5*time.Minute+TrialTimeout) {
		t.Fatalf("trial in flight: NextAttempt %v", got)
	}
}

func TestBreakerJSON(t *testing.T) {
	var b BreakerState
	opts := BreakerOptions{FailureThreshold: 1}
	b.Failure(at(time.Second), opts, half)
	b.Allow(at(time.Hour))
	b.Failure(at(time.Hour), opts, half)
	b.RateLimited(at(time.Hour), time.Minute)
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back BreakerState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
	if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", b) {
		t.Fatalf("round trip:\n got %+v\nwant %+v\njson %s", back, b, data)
	}
	const want = `{"state":"open","consecutive_failures":2,"reopens":1,"opened_at":1893459600000,"open_until":1893460140000,"not_before":1893459660000}`
	if string(data) != want {
		t.Fatalf("json\n got %s\nwant %s", data, want)
	}
	// What earlier versions stored, with RFC 3339 times, reads the same.
	const old = `{"state":"open","consecutive_failures":2,"opened_at":"2030-01-01T01:00:00Z","open_until":"2030-01-01T02:09:00+01:00","reopens":1,"not_before":"2030-01-01T01:01:00Z"}`
	back = BreakerState{}
	if err := json.Unmarshal([]byte(old), &back); err != nil || fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", b) {
		t.Fatalf("old format %s:\n got %+v, %v\nwant %+v", old, back, err, b)
	}
	// The zero value is a closed breaker and encodes small.
	data, _ = json.Marshal(BreakerState{})
	if string(data) != `{"state":"closed"}` {
		t.Fatalf("zero value json %s", data)
	}
	for _, s := range []string{`{"state":"half-open"}`, `{}`} {
		var b BreakerState
		if err := json.Unmarshal([]byte(s), &b); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"state":"ajar"}`), &back); err == nil {
		t.Fatal("unknown state accepted")
	}
	if _, err := json.Marshal(BreakerState{State: 9}); err == nil {
		t.Fatal("invalid state marshalled")
	}
	if got := CircuitState(9).String(); got != "CircuitState(9)" {
		t.Fatalf("String() = %q", got)
	}
}

// optionsCase is an options value and whether Validate accepts it.
type optionsCase[O any] struct {
	name string
	opts O
	ok   bool
}

// checkValidate reports each case that Validate does not accept or refuse
// as it should.
func checkValidate[O interface{ Validate() error }](t *testing.T, cases []optionsCase[O]) {
	t.Helper()
	for _, tc := range cases {
		if err := tc.opts.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestBreakerOptionsValidate(t *testing.T) {
	checkValidate(t, []optionsCase[BreakerOptions]{
		{"zero", BreakerOptions{}, true},
		{"defaults", DefaultBreakerOptions(), true},
		{"no jitter", BreakerOptions{Jitter: -1}, true},
		{"long open", BreakerOptions{OpenFor: 10 * time.Hour}, true}, // max follows
		{"negative threshold", BreakerOptions{FailureThreshold: -1}, false},
		{"negative open", BreakerOptions{OpenFor: -1}, false},
		{"negative max", BreakerOptions{MaxOpenFor: -1}, false},
		{"max below open", BreakerOptions{OpenFor: time.Hour, MaxOpenFor: time.Minute}, false},
		{"jitter above 1", BreakerOptions{Jitter: 1.5}, false},
		{"nan jitter", BreakerOptions{Jitter: math.NaN()}, false},
	})
}
