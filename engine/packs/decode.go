package packs

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/attune-io/attune/engine/params"
)

// decoder turns a generic decoded document (from JSON with UseNumber, or from
// YAML) into spec structs. It is hand-written rather than reflection-based so
// that every problem is reported with its dotted field name and all problems
// are reported together; encoding/json stops at the first and loses the field
// name for custom types such as Seconds.
type decoder struct {
	errs []params.FieldError
}

// fail records a problem with field.
func (d *decoder) fail(field, format string, args ...any) {
	d.errs = append(d.errs, params.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err returns the collected problems as a *SpecError, or nil.
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return &SpecError{Fields: d.errs}
}

// join builds a dotted field name.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object checks that v is an object with only the allowed keys. It returns
// nil (after recording why) when v is not an object.
func (d *decoder) object(v any, path string, allowed ...string) map[string]any {
	m, ok := asMap(v)
	if !ok {
		d.fail(path, "must be an object, got %s", kindOf(v))
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			d.fail(join(path, k), "unknown field (allowed: %s)", strings.Join(allowed, ", "))
		}
	}
	return m
}

// actionSpec decodes a whole action.
func (d *decoder) actionSpec(tree any) ActionSpec {
	m := d.object(tree, "", "ref", "description", "runtime", "entrypoint", "parameters", "timeout", "policy", "retry")
	if m == nil {
		return ActionSpec{}
	}
	s := ActionSpec{
		Ref:         d.str(m, "ref", ""),
		Description: d.str(m, "description", ""),
		Runtime:     d.str(m, "runtime", ""),
		Entrypoint:  d.str(m, "entrypoint", ""),
	}
	if v, ok := m["parameters"]; ok && v != nil {
		if _, isObj := asMap(v); !isObj {
			d.fail("parameters", "must be an object (a JSON Schema), got %s", kindOf(v))
		} else if b, err := json.Marshal(jsonSafe(v)); err != nil {
			d.fail("parameters", "cannot be represented as JSON: %v", err)
		} else {
			s.Parameters = b
		}
	}
	if t := d.seconds(m, "timeout", ""); t != nil {
		s.Timeout = *t
	}
	if v, ok := m["policy"]; ok && v != nil {
		s.Policy = d.policy(v, "policy")
	}
	if v, ok := m["retry"]; ok && v != nil {
		r := d.retry(v, "retry")
		s.Retry = &r
	}
	return s
}

// policy decodes a policy object found at path ("" for a bare policy body).
func (d *decoder) policy(v any, path string) PolicySpec {
	m := d.object(v, path, "concurrency", "max_queue_length", "queue_timeout", "rate_limit")
	if m == nil {
		return PolicySpec{}
	}
	p := PolicySpec{
		MaxQueueLength: d.intPtr(m, "max_queue_length", path),
		QueueTimeout:   d.seconds(m, "queue_timeout", path),
	}
	if cv, ok := m["concurrency"]; ok && cv != nil {
		cpath := join(path, "concurrency")
		if cm := d.object(cv, cpath, "limit", "group_by", "on_limit"); cm != nil {
			p.Concurrency = &ConcurrencySpec{
				Limit:   d.intPtr(cm, "limit", cpath),
				GroupBy: d.strList(cm, "group_by", cpath),
				OnLimit: d.str(cm, "on_limit", cpath),
			}
		}
	}
	if rv, ok := m["rate_limit"]; ok && rv != nil {
		rpath := join(path, "rate_limit")
		if rm := d.object(rv, rpath, "max", "window"); rm != nil {
			rl := &RateLimitSpec{}
			if n := d.intPtr(rm, "max", rpath); n != nil {
				rl.Max = *n
			}
			if w := d.seconds(rm, "window", rpath); w != nil {
				rl.Window = *w
			}
			p.RateLimit = rl
		}
	}
	return p
}

// retry decodes a retry object; zero fields are filled with defaults later.
func (d *decoder) retry(v any, path string) RetrySpec {
	m := d.object(v, path, "max_retries", "backoff", "retry_on")
	if m == nil {
		return RetrySpec{}
	}
	r := RetrySpec{RetryOn: d.strList(m, "retry_on", path)}
	if n := d.intPtr(m, "max_retries", path); n != nil {
		r.MaxRetries = *n
	}
	if bv, ok := m["backoff"]; ok && bv != nil {
		bpath := join(path, "backoff")
		if bm := d.object(bv, bpath, "initial", "max", "multiplier"); bm != nil {
			if s := d.seconds(bm, "initial", bpath); s != nil {
				r.Backoff.Initial = *s
			}
			if s := d.seconds(bm, "max", bpath); s != nil {
				r.Backoff.Max = *s
			}
			if f := d.number(bm, "multiplier", bpath); f != nil {
				r.Backoff.Multiplier = *f
			}
		}
	}
	return r
}

// str reads an optional string field.
func (d *decoder) str(m map[string]any, key, path string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		d.fail(join(path, key), "must be a string, got %s", kindOf(v))
	}
	return s
}

// strList reads an optional list of strings.
func (d *decoder) strList(m map[string]any, key, path string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		d.fail(join(path, key), "must be a list of strings, got %s", kindOf(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, isStr := e.(string)
		if !isStr {
			d.fail(fmt.Sprintf("%s.%d", join(path, key), i), "must be a string, got %s", kindOf(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

// intPtr reads an optional whole number.
func (d *decoder) intPtr(m map[string]any, key, path string) *int {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	f, isNum := toFloat(v)
	if !isNum || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		d.fail(join(path, key), "must be a whole number, got %s", describe(v))
		return nil
	}
	n := int(f)
	return &n
}

// number reads an optional number.
func (d *decoder) number(m map[string]any, key, path string) *float64 {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	f, isNum := toFloat(v)
	if !isNum {
		d.fail(join(path, key), "must be a number, got %s", describe(v))
		return nil
	}
	return &f
}

// seconds reads an optional duration.
func (d *decoder) seconds(m map[string]any, key, path string) *Seconds {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	s, err := ParseSeconds(v)
	if err != nil {
		d.fail(join(path, key), "%v", err)
		return nil
	}
	return &s
}

// asMap accepts the map types JSON and YAML decoding produce.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[fmt.Sprint(k)] = e
		}
		return out, true
	}
	return nil, false
}

// jsonSafe converts YAML's map[any]any (non-string keys) so that the tree
// can be marshalled as JSON.
func jsonSafe(v any) any {
	if m, ok := asMap(v); ok {
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[k] = jsonSafe(e)
		}
		return out
	}
	if l, ok := v.([]any); ok {
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = jsonSafe(e)
		}
		return out
	}
	return v
}

// toFloat reads a number decoded from JSON (json.Number, float64) or YAML
// (int, uint64, float64).
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// kindOf names the type of a decoded value for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any, map[any]any:
		return "object"
	}
	if _, ok := toFloat(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// describe shows a scalar value, or the kind of a compound one.
func describe(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []any, map[string]any, map[any]any, nil:
		return kindOf(v)
	}
	return fmt.Sprint(v)
}
