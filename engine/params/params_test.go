package params

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustCompile(t *testing.T, schema string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(schema))
	require.NoError(t, err)
	return s
}

// fieldsOf returns the field errors of err, failing unless it is a *ValidationError.
func fieldsOf(t *testing.T, err error) []FieldError {
	t.Helper()
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "want *ValidationError, got %T: %v", err, err)
	return ve.Fields
}

const targetSchema = `{
  "type": "object",
  "properties": {
    "method": {"type": "string", "default": "GET"},
    "retries": {"type": "integer", "default": 3},
    "target": {
      "type": "object",
      "default": {"host": "localhost"},
      "properties": {
        "host": {"type": "string"},
        "port": {"type": "integer", "default": 80},
        "tls": {"type": "object", "properties": {"verify": {"type": "boolean", "default": true}}}
      },
      "required": ["port"]
    }
  }
}`

func TestApplyFillsDefaultsRecursively(t *testing.T) {
	s := mustCompile(t, targetSchema)

	got, err := s.Apply(nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"method": "GET", "retries": float64(3),
		"target": map[string]any{"host": "localhost", "port": float64(80)},
	}, got, "a defaulted object gets its own nested defaults; absent optional objects are not invented")

	in := map[string]any{"method": "POST", "target": map[string]any{"host": "db", "tls": map[string]any{}}}
	got, err = s.Apply(in)
	require.NoError(t, err)
	assert.Equal(t, "POST", got["method"], "given values win over defaults")
	assert.Equal(t, map[string]any{"host": "db", "port": float64(80), "tls": map[string]any{"verify": true}}, got["target"])
	assert.Equal(t, map[string]any{"host": "db", "tls": map[string]any{}}, in["target"], "the caller's map is not modified")
}

func TestApplyDefaultsThroughRef(t *testing.T) {
	s := mustCompile(t, `{"$defs": {"port": {"type": "integer", "default": 5432}},
		"properties": {"db": {"type": "object", "properties": {"port": {"$ref": "#/$defs/port"}}}}}`)
	got, err := s.Apply(map[string]any{"db": map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"port": float64(5432)}, got["db"])
}

func TestRequiredMissingNamesTheProperty(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "required": ["url"], "properties": {
		"url": {"type": "string"},
		"target": {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer"}}}}}`)
	_, err := s.Apply(map[string]any{"target": map[string]any{}})
	assert.Equal(t, []FieldError{
		{Field: "target.port", Message: "is required"},
		{Field: "url", Message: "is required"},
	}, fieldsOf(t, err))
}

func TestTypeErrorsOneMessagePerField(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {
		"seconds": {"type": "number", "minimum": 0},
		"message": {"type": "string", "minLength": 3}}, "additionalProperties": false}`)
	_, err := s.Apply(map[string]any{"seconds": "x", "message": 5.0})
	assert.Equal(t, []FieldError{
		{Field: "message", Message: "must be string, got number"},
		{Field: "seconds", Message: "must be number, got string"},
	}, fieldsOf(t, err))
	assert.EqualError(t, err, "invalid parameters: message: must be string, got number; seconds: must be number, got string")

	_, err = s.Apply(map[string]any{"seconds": -1.0, "message": "hi", "extra": true})
	assert.Equal(t, []FieldError{
		{Field: "extra", Message: "is not allowed"},
		{Field: "message", Message: "must be at least 3 characters long"},
		{Field: "seconds", Message: "must be >= 0"},
	}, fieldsOf(t, err))
}

func TestIntegerVersusNumber(t *testing.T) {
	s := mustCompile(t, `{"properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}`)
	for _, ok := range []map[string]any{
		{"n": 3.0, "x": 1.5},
		{"n": json.Number("3"), "x": json.Number("0.25")},
		{"n": 7, "x": 2},
		{"n": json.Number("12345678901234567890")},
	} {
		_, err := s.Apply(ok)
		assert.NoError(t, err, "%v", ok)
	}
	for _, bad := range []map[string]any{{"n": 3.5}, {"n": json.Number("2.5")}} {
		_, err := s.Apply(bad)
		assert.Equal(t, []FieldError{{Field: "n", Message: "must be integer, got number"}}, fieldsOf(t, err))
	}
}

func TestApplyJSONNumbersAndNonObjects(t *testing.T) {
	s := mustCompile(t, `{"properties": {"id": {"type": "integer"}, "n": {"type": "number"}}}`)
	got, err := s.ApplyJSON(json.RawMessage(`{"id": 12345678901234567890, "n": 0.1}`))
	require.NoError(t, err)
	assert.Equal(t, json.Number("12345678901234567890"), got["id"], "large integers are not rounded")
	assert.Equal(t, 0.1, got["n"])

	for raw, msg := range map[string]string{
		`[1,2]`: "must be a JSON object, got array",
		`"x"`:   "must be a JSON object, got string",
	} {
		_, err := s.ApplyJSON(json.RawMessage(raw))
		assert.Equal(t, []FieldError{{Message: msg}}, fieldsOf(t, err), raw)
		assert.EqualError(t, err, "invalid parameters: "+msg)
	}
	got, err = s.ApplyJSON(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestEmptySchemaAcceptsAnyObject(t *testing.T) {
	for _, schema := range []string{``, `null`, `{}`} {
		s := mustCompile(t, schema)
		got, err := s.Apply(map[string]any{"anything": []any{1.0, "two"}})
		require.NoError(t, err, schema)
		assert.Equal(t, map[string]any{"anything": []any{1.0, "two"}}, got)
	}
}

func TestCompileExplainsInvalidSchemas(t *testing.T) {
	cases := map[string]string{
		`{"properties": {"a": {"minimum": "x"}}}`: "/properties/a/minimum",
		`{"properties": `:                         "not valid JSON",
		`[1]`:                                     "must be a JSON object, got array",
		`{"type": "string"}`:                      `root "type" must be "object"`,
		`{"$ref": "file:///etc/passwd"}`:          "external reference",
		`{"$ref": "other.json"}`:                  "external reference",
	}
	for schema, want := range cases {
		_, err := Compile(json.RawMessage(schema))
		require.Error(t, err, schema)
		assert.Contains(t, err.Error(), "invalid JSON Schema: ")
		assert.Contains(t, err.Error(), want, schema)
	}
}

func TestDraft07Accepted(t *testing.T) {
	s := mustCompile(t, `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": {"host": {"type": "string", "format": "hostname", "default": "localhost"}}}`)
	got, err := s.Apply(nil)
	require.NoError(t, err)
	assert.Equal(t, "localhost", got["host"])
	_, err = s.Apply(map[string]any{"host": "not a host!"})
	assert.Equal(t, []FieldError{{Field: "host", Message: "must be a valid hostname"}}, fieldsOf(t, err))
}

func TestGroupKey(t *testing.T) {
	p := map[string]any{
		"db":     "db1",
		"target": map[string]any{"port": 5432.0, "opts": map[string]any{"b": 1.0, "a": "x"}},
		"hosts":  []any{"h1", "h2"},
	}
	assert.Equal(t, "", GroupKey(nil, p))
	assert.Equal(t, `["db1",null]`, GroupKey([]string{"db", "missing"}, p))
	assert.Equal(t, `[5432,"h2",null]`, GroupKey([]string{"target.port", "hosts.1", "db.deeper"}, p))
	assert.Equal(t, `[{"a":"x","b":1}]`, GroupKey([]string{"target.opts"}, p), "object keys sorted")

	// Equal numbers land in the same queue however they were decoded.
	k := GroupKey([]string{"n"}, map[string]any{"n": 5})
	assert.Equal(t, `[5]`, k)
	assert.Equal(t, k, GroupKey([]string{"n"}, map[string]any{"n": 5.0}))
	assert.Equal(t, k, GroupKey([]string{"n"}, map[string]any{"n": json.Number("5.0")}))
	assert.Equal(t, `[12345678901234567890]`, GroupKey([]string{"n"}, map[string]any{"n": json.Number("12345678901234567890")}))
	assert.Equal(t, `["<a&b>"]`, GroupKey([]string{"s"}, map[string]any{"s": "<a&b>"}))
}

func TestCompileCachedReturnsSameSchema(t *testing.T) {
	schema := json.RawMessage(`{"properties": {"cached": {"type": "string"}}}`)
	a, err := CompileCached(schema)
	require.NoError(t, err)
	b, err := CompileCached(append(json.RawMessage(nil), schema...))
	require.NoError(t, err)
	assert.Same(t, a, b)

	_, err = CompileCached(json.RawMessage(`{"type": 5}`))
	assert.Error(t, err)
}
