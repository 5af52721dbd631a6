package option

import (
	"cmp"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"
)

type inner struct {
	A int
	B float64
}

type clock interface{ Now() time.Time }

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

type opts struct {
	Int      int
	Dur      time.Duration
	Str      string
	Byte     byte
	Float    float64
	Bool     bool
	Func     func() time.Time
	Logger   *slog.Logger
	Clock    clock
	Slice    []string
	Map      map[string]int
	Array    [2]int
	Inner    inner
	NoDef    int
	hidden   int
	Negative int
}

func defaults() opts {
	return opts{
		Int: 1, Dur: time.Second, Str: "s", Byte: 'k', Float: 0.5, Bool: true,
		Func: time.Now, Logger: slog.New(slog.DiscardHandler), Clock: fixedClock{},
		Slice: []string{"d"}, Map: map[string]int{"d": 1}, Array: [2]int{1, 2},
		Inner: inner{A: 1, B: 2}, hidden: 7, Negative: 3,
	}
}

func TestFillZero(t *testing.T) {
	var o opts
	d := defaults()
	Fill(&o, d)
	switch {
	case o.Int != 1, o.Dur != time.Second, o.Str != "s", o.Byte != 'k', o.Float != 0.5, !o.Bool:
		t.Errorf("scalars not filled: %+v", o)
	case o.Func == nil, o.Logger != d.Logger, o.Clock != d.Clock:
		t.Errorf("func, pointer or interface not filled: %+v", o)
	case len(o.Slice) != 1 || &o.Slice[0] != &d.Slice[0], o.Map["d"] != 1, o.Array != [2]int{1, 2}:
		t.Errorf("slice, map or array not filled (or copied): %+v", o)
	case o.Inner != inner{A: 1, B: 2}, o.NoDef != 0, o.Negative != 3:
		t.Errorf("struct or plain field wrong: %+v", o)
	case o.hidden != 0:
		t.Errorf("unexported field set: %d", o.hidden)
	}
}

func TestFillKeepsSetFields(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	now := func() time.Time { return time.Unix(1, 0) }
	o := opts{
		Int: -1, Dur: -time.Second, Str: "mine", Byte: 'x', Float: math.NaN(), Bool: false,
		Func: now, Logger: logger, Clock: fixedClock(time.Unix(2, 0)),
		Slice: []string{}, Map: map[string]int{}, Array: [2]int{0, 5},
		Inner: inner{B: 1}, NoDef: 4, Negative: -3,
	}
	Fill(&o, defaults())
	switch {
	case o.Int != -1, o.Dur != -time.Second, o.Str != "mine", o.Byte != 'x', !math.IsNaN(o.Float), !o.Bool:
		// Bool: false is the zero value, and so takes the default true.
		t.Errorf("set scalars changed: %+v", o)
	case o.Func().Unix() != 1, o.Logger != logger, o.Clock.Now().Unix() != 2:
		t.Errorf("set func, pointer or interface changed: %+v", o)
	case o.Slice == nil || len(o.Slice) != 0, o.Map == nil || len(o.Map) != 0:
		t.Errorf("empty, non-nil slice or map replaced: %+v", o)
	case o.Array != [2]int{0, 5}:
		t.Errorf("array set in part replaced: %v", o.Array)
	case o.Inner != inner{B: 1}:
		t.Errorf("struct set in part changed (Fill is shallow): %+v", o.Inner)
	case o.NoDef != 4, o.Negative != -3:
		t.Errorf("set ints changed: %+v", o)
	}
}

// TestFillNegativeZero: -0.0 == 0, so it takes the default as with cmp.Or,
// though reflect.Value.IsZero says it is not zero.
func TestFillNegativeZero(t *testing.T) {
	o := opts{Float: math.Copysign(0, -1), Inner: inner{B: math.Copysign(0, -1)}}
	Fill(&o, defaults())
	if o.Float != 0.5 {
		t.Errorf("Float = %v, want the default 0.5", o.Float)
	}
	if o.Inner != (inner{A: 1, B: 2}) {
		t.Errorf("Inner = %+v, want the default", o.Inner)
	}
}

func TestFillZeroDefaults(t *testing.T) {
	o := opts{Int: 2}
	Fill(&o, opts{})
	if o.Int != 2 || o.Str != "" || o.Func != nil || o.Slice != nil || o.Inner != (inner{}) {
		t.Errorf("zero defaults changed o: %+v", o)
	}
}

// TestFillIsCmpOr checks Fill against cmp.Or on the comparable fields.
func TestFillIsCmpOr(t *testing.T) {
	type comparable struct {
		I int32
		F float64
		S string
		U uint8
		D time.Duration
		X inner
	}
	d := comparable{I: 3, F: 0.25, S: "d", U: 9, D: time.Minute, X: inner{A: 1}}
	for _, o := range []comparable{
		{},
		{I: -1, F: -0.5, S: "o", U: 1, D: -time.Second, X: inner{B: 1}},
		{F: math.Copysign(0, -1), X: inner{B: math.Copysign(0, -1)}},
		{F: math.Inf(-1), S: " "},
	} {
		want := comparable{I: cmp.Or(o.I, d.I), F: cmp.Or(o.F, d.F), S: cmp.Or(o.S, d.S),
			U: cmp.Or(o.U, d.U), D: cmp.Or(o.D, d.D), X: cmp.Or(o.X, d.X)}
		got := o
		Fill(&got, d)
		if got != want {
			t.Errorf("Fill(%+v) = %+v, cmp.Or gives %+v", o, got, want)
		}
	}
}

func TestFillPanicsOnNonStruct(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Fill of an int did not panic")
		}
	}()
	i := 0
	Fill(&i, 1)
}

func TestNotNegative(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{NotNegative("max keys", 0), ""},
		{NotNegative("max keys", 3), ""},
		{NotNegative("max keys", -3), "max keys -3 is negative"},
		{NotNegative("ttl", -90*time.Second), "ttl -1m30s is negative"},
		{NotNegative("size", int64(-1)), "size -1 is negative"},
		{NotNegative("rate", -0.5), "rate -0.5 is negative"},
		{NotNegative("rate", math.Copysign(0, -1)), ""},
		{NotNegative("rate", math.NaN()), ""},
		{NotNegative("partitions", int32(-8)), "partitions -8 is negative"},
	} {
		got := ""
		if c.err != nil {
			got = c.err.Error()
		}
		if got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestJoin(t *testing.T) {
	if err := Join("robots"); err != nil {
		t.Errorf("Join of nothing = %v", err)
	}
	if err := Join("robots", nil, nil); err != nil {
		t.Errorf("Join of nils = %v", err)
	}
	bad := errors.New("ttl -1s is negative")
	err := Join("robots", nil, bad, NotNegative("max hosts", -2))
	if want := "robots options: ttl -1s is negative\nmax hosts -2 is negative"; err == nil || err.Error() != want {
		t.Errorf("Join = %q, want %q", err, want)
	}
	if !errors.Is(err, bad) {
		t.Errorf("Join(%v) does not wrap %v", err, bad)
	}
}
