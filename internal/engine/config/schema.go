package config

import (
	"bytes"
	"reflect"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/lazaret-dev/lazaret/internal/suggest"
)

// decodeAll decodes data into fc, reporting every unknown key and every
// value of the wrong type (go-toml stops at the first of these): the
// document is first decoded generically and walked against the file*
// types; what does not fit is reported and dropped, and the rest is
// decoded for the value checks of build, so that one pass of `lazaret
// config check` lists every problem. It reports whether fc is usable.
func (v *validator) decodeAll(data []byte, fc *fileConfig) bool {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		_ = v.decodeError(err) // a syntax error: nothing after it is reliable
		return false
	}
	v.table(nil, doc, reflect.TypeOf(fileConfig{}))
	clean, err := toml.Marshal(doc)
	if err == nil {
		dec := toml.NewDecoder(bytes.NewReader(clean))
		dec.DisallowUnknownFields()
		err = dec.Decode(fc)
	}
	if err != nil {
		// Not expected after the walk; never accept what was not checked.
		v.errs = append(v.errs, &Error{File: v.file, Msg: "cannot decode: " + oneLine(err.Error())})
		return false
	}
	return true
}

// fieldsOf maps the TOML keys of struct type t to their field types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name != "" {
			m[name] = f.Type
		}
	}
	return m
}

// table checks the keys of tbl (a struct type t) and drops the bad ones.
func (v *validator) table(key keyPath, tbl map[string]any, t reflect.Type) {
	fields := fieldsOf(t)
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	for _, k := range sortedKeys(tbl) {
		ft, ok := fields[k]
		if !ok {
			v.fail(key.child(k), ruleErrf("unknown key%s", suggest.Hint(k, known)))
			delete(tbl, k)
			continue
		}
		if !v.value(key.child(k), tbl[k], ft) {
			delete(tbl, k)
			continue
		}
		if n, isInt := tbl[k].(int64); isInt && deref(ft).Kind() == reflect.Float64 {
			tbl[k] = float64(n)
		}
	}
}

// value checks val against type t, reporting what is wrong; false means
// the caller drops it (an array is dropped whole when an element is bad:
// dropping only the element would shift the indexes of later messages).
func (v *validator) value(key keyPath, val any, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	ok := false
	switch t.Kind() {
	case reflect.String:
		_, ok = val.(string)
	case reflect.Bool:
		_, ok = val.(bool)
	case reflect.Int64:
		_, ok = val.(int64)
	case reflect.Float64:
		switch val.(type) {
		case float64, int64: // cpus = 2 is a number too; decoded below
			ok = true
		}
	case reflect.Slice:
		if arr, isArr := val.([]any); isArr {
			ok = true
			for i, el := range arr {
				ok = v.value(key.index(i), el, t.Elem()) && ok
			}
			return ok
		}
	case reflect.Map:
		if m, isTbl := val.(map[string]any); isTbl {
			for _, k := range sortedKeys(m) {
				if !v.value(key.child(k), m[k], t.Elem()) {
					delete(m, k)
				}
			}
			return true
		}
	case reflect.Struct:
		if m, isTbl := val.(map[string]any); isTbl {
			v.table(key, m, t)
			return true
		}
	}
	if !ok {
		v.fail(key, ruleErrf("wrong type: got %s, want %s", tomlType(val), expectedType(key)))
	}
	return ok
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// tomlType names the TOML type of a generically decoded value.
func tomlType(val any) string {
	switch val.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "float"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	}
	return "datetime"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
