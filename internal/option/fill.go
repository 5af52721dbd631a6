// Package option holds what the options structs of newsflow share. Each is
// declared as STYLE.md asks: a DefaultOptions() next to the type, the zero
// value of every field standing for its default, and a Validate() error.
// [Fill] applies the defaults, so that a withDefaults method states only
// what is particular to its options.
package option

import "reflect"

// Fill sets each field of *o that is zero to the same field of d, the
// defaults: for every field f, o.f = cmp.Or(o.f, d.f), whatever f's type.
// A field whose default is zero is left as it is.
//
// A field is zero as == compares it with its type's zero value: 0 (and so
// also -0.0; NaN is not zero), "", false, nil for a pointer, func,
// interface, channel, map or slice, and for an array or struct every
// element zero. An empty slice or map that is not nil is set, and kept: to
// have an empty list stand for the default too, say so before calling Fill.
//
// Fill is shallow. A struct field is replaced only when it is zero as a
// whole; where options nest other options that may be set in part, fill
// the nested ones first, with their own defaults. Pointers are copied,
// never followed. Unexported fields are left alone. Fill panics if T is
// not a struct type.
func Fill[T any](o *T, d T) {
	ov, dv := reflect.ValueOf(o).Elem(), reflect.ValueOf(&d).Elem()
	if ov.Kind() != reflect.Struct {
		panic("option.Fill of " + ov.Type().String() + ", not a struct")
	}
	t := ov.Type()
	for i := range ov.NumField() {
		if f := ov.Field(i); t.Field(i).IsExported() && isZero(f) {
			f.Set(dv.Field(i))
		}
	}
}

// isZero reports whether v == its type's zero value would hold, for any
// type: reflect.Value.IsZero, except that it takes -0.0 for zero as ==
// does.
func isZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Complex64, reflect.Complex128:
		return v.Complex() == 0
	case reflect.Array:
		for i := range v.Len() {
			if !isZero(v.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range v.NumField() {
			if !isZero(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return v.IsZero()
}
