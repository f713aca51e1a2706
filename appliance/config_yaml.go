package appliance

import (
	"reflect"
	"strings"

	"github.com/attune-io/attune/appliance/config"
)

// toYAML renders a Config as a map keyed by its koanf tags, so `attune
// config` prints the same key names the file and env vars use.
func toYAML(c config.Config) map[string]any { return structToMap(reflect.ValueOf(c)) }

func structToMap(v reflect.Value) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := range t.NumField() {
		name := strings.Split(t.Field(i).Tag.Get("koanf"), ",")[0]
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			out[name] = structToMap(f)
		} else {
			out[name] = f.Interface()
		}
	}
	return out
}
