package packs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// specFields returns the field errors of err, failing unless it is a *SpecError.
func specFields(t *testing.T, err error) []params.FieldError {
	t.Helper()
	var se *SpecError
	require.True(t, errors.As(err, &se), "want *SpecError, got %T: %v", err, err)
	return se.Fields
}

func TestSecondsAcceptsNumbersAndDurations(t *testing.T) {
	for in, want := range map[string]Seconds{`12`: 12, `1.5`: 1.5, `"30s"`: 30, `"5m"`: 300, `"1h30m"`: 5400, `"250ms"`: 0.25, `"7"`: 7} {
		var fromJSON Seconds
		require.NoError(t, json.Unmarshal([]byte(in), &fromJSON), in)
		assert.Equal(t, want, fromJSON, "JSON %s", in)

		var fromYAML struct{ T Seconds }
		require.NoError(t, yaml.Unmarshal([]byte("t: "+in), &fromYAML), in)
		assert.Equal(t, want, fromYAML.T, "YAML %s", in)
	}
	var s Seconds
	assert.ErrorContains(t, json.Unmarshal([]byte(`"soon"`), &s), `must be seconds (e.g. 30 or 1.5) or a duration (e.g. "30s", "5m"), got "soon"`)
	assert.ErrorContains(t, yaml.Unmarshal([]byte(`[1]`), &s), "got list")

	out, err := json.Marshal(Seconds(90))
	require.NoError(t, err)
	assert.Equal(t, `90`, string(out), "encoded as plain seconds")
}

func TestSpecDecodingNamesEveryBadField(t *testing.T) {
	doc := `
ref: x
runtime: 5
timeout: soon
parameters: [1]
policy:
  concurrency: {limit: 1.5, group_by: db}
  rate_limit: {max: 2, window: forever, burst: 3}
retry: {max_retries: "3"}
`
	var spec ActionSpec
	err := yaml.Unmarshal([]byte(doc), &spec)
	assert.Equal(t, []params.FieldError{
		{Field: "runtime", Message: "must be a string, got number"},
		{Field: "parameters", Message: "must be an object (a JSON Schema), got list"},
		{Field: "timeout", Message: `must be seconds (e.g. 30 or 1.5) or a duration (e.g. "30s", "5m"), got "soon"`},
		{Field: "policy.concurrency.limit", Message: "must be a whole number, got 1.5"},
		{Field: "policy.concurrency.group_by", Message: "must be a list of strings, got string"},
		{Field: "policy.rate_limit.burst", Message: "unknown field (allowed: max, window)"},
		{Field: "policy.rate_limit.window", Message: `must be seconds (e.g. 30 or 1.5) or a duration (e.g. "30s", "5m"), got "forever"`},
		{Field: "retry.max_retries", Message: `must be a whole number, got "3"`},
	}, specFields(t, err))

	// The API receives the same fields as JSON and gets the same errors.
	err = json.Unmarshal([]byte(`{"ref":"p.x","runtime":"builtin","policy":{"concurrency":{"limit":"two"}},"extra":1}`), &spec)
	assert.Equal(t, []params.FieldError{
		{Field: "extra", Message: "unknown field (allowed: ref, description, runtime, entrypoint, parameters, timeout, policy, retry)"},
		{Field: "policy.concurrency.limit", Message: `must be a whole number, got "two"`},
	}, specFields(t, err))
	assert.ErrorContains(t, json.Unmarshal([]byte(`[]`), &spec), "invalid action: must be an object, got list")
}

func TestToActionSpecErrors(t *testing.T) {
	packDir := t.TempDir()
	writeFiles(t, packDir, map[string]string{"actions/ok.sh": "true\n"})
	base := filepath.Join(packDir, "actions")
	zero, one := 0, 1
	half := Seconds(0.5)
	cases := map[string]struct {
		spec ActionSpec
		want params.FieldError
	}{
		"runtime":       {ActionSpec{Ref: "x", Runtime: "ruby"}, params.FieldError{Field: "runtime", Message: "must be one of builtin, shell, python, node"}},
		"no runtime":    {ActionSpec{Ref: "x"}, params.FieldError{Field: "runtime", Message: "is required: one of builtin, shell, python, node"}},
		"no ref":        {ActionSpec{Runtime: "builtin", Entrypoint: "noop"}, params.FieldError{Field: "ref", Message: "is required (pack.name, or name inside a pack)"}},
		"bad name":      {ActionSpec{Ref: "Hello!", Runtime: "builtin", Entrypoint: "noop"}, params.FieldError{Field: "ref", Message: `name "Hello!" must be 1-100 lowercase letters, digits, '_' or '-'`}},
		"limit":         {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{Concurrency: &ConcurrencySpec{Limit: &zero}}}, params.FieldError{Field: "policy.concurrency.limit", Message: "must be positive"}},
		"on_limit":      {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{Concurrency: &ConcurrencySpec{Limit: &one, OnLimit: "drop"}}}, params.FieldError{Field: "policy.concurrency.on_limit", Message: "must be one of enqueue, cancel"}},
		"group_by":      {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{Concurrency: &ConcurrencySpec{Limit: &one, GroupBy: []string{"a..b"}}}}, params.FieldError{Field: "policy.concurrency.group_by.0", Message: `must be a dotted parameter path like "db" or "target.host", got "a..b"`}},
		"queue length":  {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{MaxQueueLength: &zero}}, params.FieldError{Field: "policy.max_queue_length", Message: "must be positive"}},
		"queue timeout": {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{QueueTimeout: &half}}, params.FieldError{Field: "policy.queue_timeout", Message: "must be a positive whole number of seconds"}},
		"rate window":   {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Policy: PolicySpec{RateLimit: &RateLimitSpec{Max: 1}}}, params.FieldError{Field: "policy.rate_limit.window", Message: "must be a positive duration"}},
		"timeout":       {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Timeout: -1}, params.FieldError{Field: "timeout", Message: "must be a non-negative number of seconds (0 = none)"}},
		"retry_on":      {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Retry: &RetrySpec{MaxRetries: 2, RetryOn: []string{"always"}}}, params.FieldError{Field: "retry.retry_on.0", Message: "must be one of worker_lost, queue_expired, timeout, failed"}},
		"retry silent":  {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Retry: &RetrySpec{MaxRetries: 2}}, params.FieldError{Field: "retry.retry_on", Message: "must list when to retry: any of worker_lost, queue_expired, timeout, failed"}},
		"backoff":       {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "noop", Retry: &RetrySpec{Backoff: BackoffSpec{Initial: 10, Max: 5}}}, params.FieldError{Field: "retry.backoff.max", Message: "must be at least backoff.initial (10s)"}},
		"builtin":       {ActionSpec{Ref: "x", Runtime: "builtin", Entrypoint: "frobnicate"}, params.FieldError{Field: "entrypoint", Message: `unknown builtin "frobnicate": one of echo, http_request, local, noop, sleep`}},
		"no script":     {ActionSpec{Ref: "x", Runtime: "python"}, params.FieldError{Field: "entrypoint", Message: "is required for runtime python: the script file to run"}},
		"missing file":  {ActionSpec{Ref: "x", Runtime: "shell", Entrypoint: "x.sh"}, params.FieldError{Field: "entrypoint", Message: "file actions/x.sh not found in pack mypack"}},
		"schema": {ActionSpec{Ref: "x", Runtime: "shell", Entrypoint: "ok.sh", Parameters: json.RawMessage(`{"properties":{"n":{"type":"integr"}}}`)},
			params.FieldError{Field: "parameters", Message: "invalid JSON Schema: at /properties/n/type: "}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.spec.ToAction("mypack", packDir, base)
			fields := specFields(t, err)
			require.Len(t, fields, 1, "%v", err)
			assert.Equal(t, c.want.Field, fields[0].Field)
			if name == "schema" {
				assert.Contains(t, fields[0].Message, c.want.Message)
			} else {
				assert.Equal(t, c.want.Message, fields[0].Message)
			}
			assert.ErrorContains(t, err, "invalid action: "+c.want.Field+": ")
		})
	}

	// Every problem at once, not just the first.
	_, err := ActionSpec{Ref: "x", Runtime: "ruby", Timeout: -1, Policy: PolicySpec{Concurrency: &ConcurrencySpec{Limit: &zero}}}.ToAction("mypack", packDir, base)
	assert.EqualError(t, err, "invalid action: runtime: must be one of builtin, shell, python, node; "+
		"timeout: must be a non-negative number of seconds (0 = none); policy.concurrency.limit: must be positive")
}

func TestToActionForAPIRegisteredActions(t *testing.T) {
	_, err := ActionSpec{Ref: "ops.run", Runtime: "shell", Entrypoint: "run.sh"}.ToAction("", "", "")
	assert.ErrorContains(t, err, `entrypoint: "run.sh" is relative, but actions registered through the API have no pack directory: use runtime builtin or an absolute path to an existing file`)

	_, err = ActionSpec{Ref: "run", Runtime: "builtin", Entrypoint: "noop"}.ToAction("", "", "")
	assert.EqualError(t, err, `invalid action: ref: must be pack.name, got "run"`)

	_, err = ActionSpec{Ref: "ops.run", Runtime: "shell", Entrypoint: "/definitely/not/here.sh"}.ToAction("", "", "")
	assert.ErrorContains(t, err, "entrypoint: file /definitely/not/here.sh not found")

	script := filepath.Join(t.TempDir(), "run.sh")
	require.NoError(t, os.WriteFile(script, []byte("true\n"), 0o644))
	a, err := ActionSpec{Ref: "ops.run", Runtime: "shell", Entrypoint: script}.ToAction("", "", "")
	require.NoError(t, err)
	assert.Equal(t, "ops", a.Pack)
	assert.Equal(t, "run", a.Name)
	assert.Equal(t, script, a.Entrypoint)

	a, err = ActionSpec{Ref: "ops.hi", Runtime: "builtin", Entrypoint: "core.echo", Parameters: json.RawMessage(`{"properties": {"message": {"type": "string", "default": "hi"}}}`)}.ToAction("", "", "")
	require.NoError(t, err)
	assert.Equal(t, "echo", a.Entrypoint, "builtin names are stored bare")
	assert.JSONEq(t, `{"properties":{"message":{"type":"string","default":"hi"}}}`, string(a.Parameters), "own schema wins over the builtin's")
}

func TestPolicySpecStandalone(t *testing.T) {
	var p PolicySpec
	require.NoError(t, json.Unmarshal([]byte(`{"concurrency":{"limit":4,"group_by":["tenant"]},"queue_timeout":"2m"}`), &p))
	pol, err := p.ToPolicy()
	require.NoError(t, err)
	assert.Equal(t, 4, *pol.Concurrency.Limit)
	assert.Equal(t, "enqueue", pol.Concurrency.OnLimit, "the default is spelled out")
	assert.Equal(t, 120, *pol.QueueTimeout)
	back := PolicyToSpec(pol)
	assert.Equal(t, []string{"tenant"}, back.Concurrency.GroupBy)
	assert.Equal(t, Seconds(120), *back.QueueTimeout)

	err = json.Unmarshal([]byte(`{"concurrency":{"limit":0},"paused":true}`), &p)
	assert.Equal(t, []params.FieldError{{Field: "paused", Message: "unknown field (allowed: concurrency, max_queue_length, queue_timeout, rate_limit)"}}, specFields(t, err))
	zero := 0
	_, err = PolicySpec{Concurrency: &ConcurrencySpec{Limit: &zero}}.ToPolicy()
	assert.EqualError(t, err, "invalid action: concurrency.limit: must be positive")
}

func TestCorePack(t *testing.T) {
	core := Core()
	assert.Equal(t, "core", core.Pack.Ref)
	refs := map[string]bool{}
	for _, a := range core.Actions {
		refs[a.Ref] = true
		assert.Equal(t, "builtin", a.Runtime)
		assert.Equal(t, a.Name, a.Entrypoint, "entrypoint is the bare builtin name")
		assert.NotEmpty(t, a.Description)
		_, err := params.Compile(a.Parameters)
		assert.NoError(t, err, a.Ref)
	}
	assert.Equal(t, map[string]bool{"core.noop": true, "core.echo": true, "core.sleep": true, "core.local": true, "core.http_request": true}, refs)

	sleep := findAction(t, core, "core.sleep")
	s, err := params.CompileCached(sleep.Parameters)
	require.NoError(t, err)
	_, err = s.Apply(map[string]any{"seconds": "x"})
	assert.EqualError(t, err, "invalid parameters: seconds: must be number, got string")
	_, err = s.Apply(map[string]any{"seconds": 0.25})
	assert.NoError(t, err, "fractions allowed")

	hr, err := params.CompileCached(findAction(t, core, "core.http_request").Parameters)
	require.NoError(t, err)
	got, err := hr.Apply(map[string]any{"url": "https://example.com"})
	require.NoError(t, err)
	assert.Equal(t, "GET", got["method"], "builtin defaults apply")
}

func findAction(t *testing.T, p Pack, ref string) store.Action {
	t.Helper()
	for _, a := range p.Actions {
		if a.Ref == ref {
			return a
		}
	}
	t.Fatalf("no action %s", ref)
	return store.Action{}
}

func TestActionFromJSON(t *testing.T) {
	a, err := ActionFromJSON([]byte(`{"ref": "ops.wait", "runtime": "builtin", "entrypoint": "sleep", "timeout": "1m"}`))
	require.NoError(t, err)
	assert.Equal(t, "ops.wait", a.Ref)
	assert.Equal(t, 60.0, a.TimeoutSeconds)
	assert.Contains(t, string(a.Parameters), `"seconds"`)

	_, err = ActionFromJSON([]byte(`{"ref": "ops.x", "runtime": 7, "timeout": "soon", "policy": {"concurrency": {"limit": 0}}}`))
	assert.Equal(t, []params.FieldError{
		{Field: "runtime", Message: "must be a string, got number"},
		{Field: "timeout", Message: `must be seconds (e.g. 30 or 1.5) or a duration (e.g. "30s", "5m"), got "soon"`},
		{Field: "policy.concurrency.limit", Message: "must be positive"},
	}, specFields(t, err), "decoding and validation problems together, each field once")

	_, err = ActionFromJSON([]byte(`{"ref": `))
	assert.ErrorContains(t, err, "invalid action: not valid JSON")
}
