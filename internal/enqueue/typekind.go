package enqueue

import "reflect"

// TypeKind is T's kind if T names one (the root's Kinded: a Kind method),
// read on a zero T, or on a new value if T is a pointer type.
func TypeKind[T any]() (string, bool) {
	var v T
	if rt := reflect.TypeFor[T](); rt.Kind() == reflect.Pointer {
		v = reflect.New(rt.Elem()).Interface().(T)
	}
	k, ok := any(v).(interface{ Kind() string })
	if !ok {
		return "", false
	}
	return k.Kind(), true
}

// TypeName is T's name for errors, with its package ("main.Email").
func TypeName[T any]() string { return reflect.TypeFor[T]().String() }
