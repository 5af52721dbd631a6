package option

import (
	"errors"
	"fmt"
)

// NotNegative returns an error naming the field when v is below zero, and
// nil otherwise. NaN is not below zero: a float field that must be a
// number is checked apart.
func NotNegative[T ~int | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64](field string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s %v is negative", field, v)
	}
	return nil
}

// Join returns the errors of errs that are not nil as one error of what's
// options ("robots options: ttl -1s is negative"), one line each, or nil
// when there are none. A Validate that checks every field and reports all
// it finds wrong ends with it.
func Join(what string, errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s options: %w", what, err)
	}
	return nil
}
