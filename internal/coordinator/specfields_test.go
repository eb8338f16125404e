package coordinator

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// The tests below go over ContainerSpec's fields by reflection, so a field
// added to the spec that cloneSpec or mergeSpec does not handle fails here
// instead of being silently dropped between components.

// filled returns a value of t with every field set (variant tells two
// fillings apart: each string, number and collection differs).
func filled(t reflect.Type, variant int) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", variant))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(10 + variant))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(10 + variant))
	case reflect.Bool:
		v.SetBool(variant%2 == 1)
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		for i := 0; i <= variant; i++ {
			v.SetMapIndex(filled(t.Key(), i), filled(t.Elem(), i))
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(t, 0, variant+1))
		for i := 0; i <= variant; i++ {
			v.Set(reflect.Append(v, filled(t.Elem(), i)))
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			v.Field(i).Set(filled(t.Field(i).Type, variant))
		}
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(filled(t.Elem(), variant))
	default:
		panic("filled: no rule for " + t.String())
	}
	return v
}

// sharesMemory reports the path of a map or slice that a and b share.
func sharesMemory(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer:
		if !a.IsNil() && a.UnsafePointer() == b.UnsafePointer() {
			return path
		}
	}
	switch a.Kind() {
	case reflect.Slice:
		for i := 0; i < min(a.Len(), b.Len()); i++ {
			if p := sharesMemory(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Pointer:
		if !a.IsNil() && !b.IsNil() {
			return sharesMemory(a.Elem(), b.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if p := sharesMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestCloneSpecCopiesEveryField(t *testing.T) {
	base := filled(reflect.TypeFor[podman.ContainerSpec](), 1).Interface().(podman.ContainerSpec)
	c := cloneSpec(&base)
	if !reflect.DeepEqual(*c, base) {
		t.Fatalf("clone differs:\n%+v\n%+v", *c, base)
	}
	if p := sharesMemory(reflect.ValueOf(*c), reflect.ValueOf(base), "ContainerSpec"); p != "" {
		t.Errorf("cloneSpec shares %s with the original: a component's change would reach the others", p)
	}
	// Control: a shallow copy is caught.
	shallow := base
	if sharesMemory(reflect.ValueOf(shallow), reflect.ValueOf(base), "ContainerSpec") == "" {
		t.Error("control: a shallow copy was not caught")
	}
}

func TestMergeSpecAppliesEveryField(t *testing.T) {
	typ := reflect.TypeFor[podman.ContainerSpec]()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			base := filled(typ, 1).Interface().(podman.ContainerSpec)
			changed := *cloneSpec(&base)
			reflect.ValueOf(&changed).Elem().Field(i).Set(filled(f.Type, 2))
			dst := cloneSpec(&base)
			mergeSpec(dst, &base, &changed)
			got := reflect.ValueOf(dst).Elem().Field(i).Interface()
			if want := reflect.ValueOf(changed).Field(i).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("mergeSpec dropped a component's change of %s: got %v, want %v", f.Name, got, want)
			}
		})
	}
}
