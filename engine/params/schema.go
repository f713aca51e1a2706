// Package params compiles action parameter schemas (JSON Schema) and applies
// them to requested parameters: defaults first, then validation, with one
// readable message per bad field so the API can answer 400 with a list a user
// can act on.
package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL names the in-memory resource a schema is compiled as. Its scheme
// has no loader, so a relative "$ref" resolves to a refused mem:// URL
// instead of the file system (and not, as with an opaque URN, to itself).
const schemaURL = "mem:///parameters.json"

// maxSchemaHops bounds how many $ref/allOf hops defaulting follows without
// descending into the data, so a self-referencing schema cannot loop forever.
const maxSchemaHops = 32

// Schema is a compiled parameter schema. It is immutable and safe for
// concurrent use, which is what lets CompileCached share one per schema.
type Schema struct {
	compiled *jsonschema.Schema // nil: accept any object
}

// noLoader refuses every external reference: a schema registered through the
// API must not make the server read local files or fetch URLs.
type noLoader struct{}

// Load implements jsonschema.URLLoader by refusing.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; keep the schema self-contained (use $defs)", url)
}

// Compile compiles a parameter schema. An empty schema, "null" or {} accepts
// any object. The default dialect is draft 2020-12; a "$schema" naming another
// draft (e.g. draft-07) is honoured. Formats are asserted (a "format": "email"
// property rejects non-addresses) because users write them expecting checks.
func Compile(schema json.RawMessage) (*Schema, error) {
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return &Schema{}, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid JSON Schema: must be a JSON object, got %s", jsonKind(doc))
	}
	if len(obj) == 0 {
		return &Schema{}, nil
	}
	if err := checkRootType(obj); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %v", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", describeCompileError(err))
	}
	return &Schema{compiled: compiled}, nil
}

// checkRootType rejects schemas whose root cannot describe an object: the
// parameters of an execution are always an object, so such a schema would
// reject every request, and it is better to say so when the action is defined.
func checkRootType(obj map[string]any) error {
	t, ok := obj["type"]
	if !ok {
		return nil
	}
	switch t := t.(type) {
	case string:
		if t == "object" {
			return nil
		}
	case []any:
		for _, v := range t {
			if v == "object" {
				return nil
			}
		}
	}
	return fmt.Errorf("invalid JSON Schema: parameters are an object, so the root \"type\" must be \"object\" (got %v)", t)
}

// describeCompileError turns the library's multi-line metaschema report into
// one line that names the offending schema locations.
func describeCompileError(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		var parts []string
		for _, leaf := range leaves(ve) {
			loc := "/" + strings.Join(leaf.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, leaf.ErrorKind.LocalizedString(printer)))
		}
		slices.Sort(parts)
		return strings.Join(slices.Compact(parts), "; ")
	}
	return strings.ReplaceAll(err.Error(), schemaURL, "schema")
}

// cache holds compiled schemas keyed by their exact bytes.
var cache sync.Map // string -> *Schema

// CompileCached is Compile with a process-wide cache keyed by the schema
// bytes, so validating each execution request does not recompile the action's
// schema. Failures are not cached; they are rare and must stay visible.
func CompileCached(schema json.RawMessage) (*Schema, error) {
	key := string(schema)
	if s, ok := cache.Load(key); ok {
		return s.(*Schema), nil
	}
	s, err := Compile(schema)
	if err != nil {
		return nil, err
	}
	actual, _ := cache.LoadOrStore(key, s)
	return actual.(*Schema), nil
}

// Apply fills defaults (recursively into nested objects that are present or
// were themselves defaulted), then validates. It returns the completed
// parameters without modifying the input, or a *ValidationError listing one
// message per bad field. A nil map counts as an empty object.
func (s *Schema) Apply(params map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(params))
	for k, v := range params {
		nv, err := normalize(v)
		if err != nil {
			return nil, &ValidationError{Fields: []FieldError{{Field: k, Message: err.Error()}}}
		}
		out[k] = nv
	}
	if s == nil || s.compiled == nil {
		return out, nil
	}
	fillDefaults(s.compiled, out, 0)
	if err := s.compiled.Validate(out); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, &ValidationError{Fields: fieldErrors(ve)}
		}
		return nil, &ValidationError{Fields: []FieldError{{Message: err.Error()}}}
	}
	return out, nil
}

// ApplyJSON decodes raw parameters (empty or null = {}) and applies the
// schema. Anything but a JSON object is refused with a *ValidationError, so
// the API can answer 400 the same way as for a bad field.
func (s *Schema) ApplyJSON(raw json.RawMessage) (map[string]any, error) {
	m, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	return s.Apply(m)
}

// Decode parses raw parameters into a map. Empty input or null is an empty
// object; numbers keep full precision for integers beyond 2^53 (json.Number)
// and are float64 otherwise, matching what encoding/json gives callers.
func Decode(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ValidationError{Fields: []FieldError{{Message: "not valid JSON: " + err.Error()}}}
	}
	if dec.More() {
		return nil, &ValidationError{Fields: []FieldError{{Message: "not valid JSON: unexpected data after the object"}}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ValidationError{Fields: []FieldError{{Message: "must be a JSON object, got " + jsonKind(v)}}}
	}
	nv, err := normalize(m)
	if err != nil {
		return nil, &ValidationError{Fields: []FieldError{{Message: err.Error()}}}
	}
	return nv.(map[string]any), nil
}

// fillDefaults sets missing properties that declare a default, then descends
// into object-valued properties. Missing parent objects are not created: an
// optional nested object the caller left out stays out.
func fillDefaults(sch *jsonschema.Schema, obj map[string]any, hops int) {
	if sch == nil || hops > maxSchemaHops {
		return
	}
	fillDefaults(sch.Ref, obj, hops+1)
	for _, sub := range sch.AllOf {
		fillDefaults(sub, obj, hops+1)
	}
	for _, name := range slices.Sorted(maps.Keys(sch.Properties)) {
		prop := sch.Properties[name]
		if _, present := obj[name]; !present {
			if def := defaultOf(prop); def != nil {
				v, err := normalize(*def)
				if err != nil {
					continue // a default that is not JSON cannot come from a parsed schema
				}
				obj[name] = v
			}
		}
		if child, ok := obj[name].(map[string]any); ok {
			fillDefaults(prop, child, 0)
		}
	}
}

// defaultOf returns the default of sch, following $ref when the referring
// schema has none of its own.
func defaultOf(sch *jsonschema.Schema) *any {
	for hops := 0; sch != nil && hops <= maxSchemaHops; hops++ {
		if sch.Default != nil {
			return sch.Default
		}
		sch = sch.Ref
	}
	return nil
}

// normalize deep-copies a parameter value into plain JSON types, so Apply
// never mutates the caller's map and the validator only sees types it knows.
// Other Go values (structs, typed slices) go through a JSON round trip.
func normalize(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32:
		return v, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, errors.New("must be a finite number")
		}
		return v, nil
	case json.Number:
		return numberValue(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ne, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = ne
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			ne, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = ne
		}
		return out, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("cannot be represented as JSON: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var out any
		if err := dec.Decode(&out); err != nil {
			return nil, err
		}
		return normalize(out)
	}
}

// numberValue returns n as float64 when that is exact (what encoding/json
// would have produced anyway) and keeps the json.Number otherwise, so a large
// integer id is not silently rounded.
func numberValue(n json.Number) (any, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil, fmt.Errorf("invalid number %q", string(n))
	}
	f, err := n.Float64()
	if err == nil {
		if fr, ok := new(big.Rat).SetString(fmt.Sprint(f)); ok && fr.Cmp(r) == 0 {
			return f, nil
		}
	}
	return n, nil
}

// jsonKind names the JSON type of a decoded value, for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "number"
	}
}
