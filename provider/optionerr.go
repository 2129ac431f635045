package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pgimageai/pgimageai/internal/suggest"
)

// optionError rewrites an error of encoding/json about models.options for a
// person: an unknown key with the nearest known one, and a value of the wrong
// JSON type named by JSON's types (a number, a string), not Go's.
func optionError(err error, v any) error {
	known := optionKeys(reflect.TypeOf(v))
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		hint := suggest.Hint(name, known)
		return fmt.Errorf("unknown option %q%s; the options of this provider are %s", name, hint, strings.Join(known, ", "))
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		key := typeErr.Field
		if i := strings.LastIndex(key, "."); i >= 0 {
			key = key[i+1:]
		}
		if key == "" {
			return fmt.Errorf("options must be a JSON object, got %s", jsonKind(typeErr.Value))
		}
		return fmt.Errorf("option %s must be %s, got %s", key, wantKind(typeErr.Type), jsonKind(typeErr.Value))
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("options are not valid JSON (at byte %d): %v", syntax.Offset, err)
	}
	return err
}

// optionKeys are the JSON keys a struct type decodes, embedded structs
// included, sorted.
func optionKeys(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case f.Anonymous && tag == "":
			keys = append(keys, optionKeys(f.Type)...)
		case !f.IsExported():
		case tag != "":
			keys = append(keys, tag)
		default:
			keys = append(keys, f.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// wantKind names the JSON a Go type decodes from.
func wantKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(Duration(0)) {
		return `a duration ("30s") or a number of seconds`
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// jsonKind names what encoding/json found ("number", "string", "number
// 1.5", …) as a person reads JSON.
func jsonKind(v string) string {
	switch {
	case v == "number" || strings.HasPrefix(v, "number "):
		return "a number"
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	}
	return v
}
