package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// BuiltinSpec describes one builtin action so the core pack can be registered
// from the code that implements it, keeping schema and behaviour in one place.
type BuiltinSpec struct {
	// Name is the bare name ("echo"); the core pack registers it as
	// "core.<Name>" with runtime Builtin and entrypoint Name.
	Name string
	// Description is shown to users in the catalogue.
	Description string
	// Parameters is a JSON Schema (draft 2020-12) of the parameters object.
	Parameters json.RawMessage
}

// builtinFunc is an in-process builtin: it returns the result JSON or an error.
// An error while ctx is done is reported as TimedOut/Cancelled, not Failed.
type builtinFunc func(ctx context.Context, r *Runner, req Request) (json.RawMessage, error)

// builtin pairs a spec with its implementation; fn is nil for core.local,
// which runs a process and so goes through runCommand.
type builtin struct {
	spec BuiltinSpec
	fn   builtinFunc
}

const schemaHeader = `"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"`

// builtins is the table of core actions, in the order Builtins returns them.
var builtins = []builtin{
	{BuiltinSpec{
		Name:        "echo",
		Description: "Returns its message; useful to test the pipeline end to end.",
		Parameters: json.RawMessage(`{` + schemaHeader + `,
  "properties": {"message": {"type": "string", "description": "Text to return."}},
  "required": ["message"], "additionalProperties": false}`),
	}, runEcho},
	{BuiltinSpec{
		Name:        "http_request",
		Description: "Performs an HTTP request and returns status code, headers and body. HTTP error statuses still succeed; the caller decides what they mean.",
		Parameters: json.RawMessage(`{` + schemaHeader + `,
  "properties": {
    "url": {"type": "string", "format": "uri", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://", "description": "http or https URL."},
    "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Request headers."},
    "body": {"type": "string", "description": "Request body."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "default": 30, "description": "Request timeout in seconds."}
  },
  "required": ["url"], "additionalProperties": false}`),
	}, runHTTPRequest},
	{BuiltinSpec{
		Name:        "local",
		Description: "Runs a shell command with /bin/sh -c; stdout becomes the result (JSON if it parses), non-zero exit fails.",
		Parameters: json.RawMessage(`{` + schemaHeader + `,
  "properties": {"cmd": {"type": "string", "minLength": 1, "description": "Shell command line."}},
  "required": ["cmd"], "additionalProperties": false}`),
	}, nil},
	{BuiltinSpec{
		Name:        "noop",
		Description: "Does nothing and succeeds at once.",
		Parameters:  json.RawMessage(`{` + schemaHeader + `, "properties": {}}`),
	}, runNoop},
	{BuiltinSpec{
		Name:        "sleep",
		Description: "Sleeps for the given number of seconds; honours timeout and cancellation.",
		Parameters: json.RawMessage(`{` + schemaHeader + `,
  "properties": {"seconds": {"type": "number", "minimum": 0, "description": "Seconds to sleep; fractions allowed."}},
  "required": ["seconds"], "additionalProperties": false}`),
	}, runSleep},
}

// Builtins lists the builtin actions with their parameter schemas, sorted by
// name. The returned slice is a copy and may be modified by the caller.
func Builtins() []BuiltinSpec {
	out := make([]BuiltinSpec, len(builtins))
	for i, b := range builtins {
		out[i] = b.spec
		out[i].Parameters = append(json.RawMessage(nil), b.spec.Parameters...)
	}
	return out
}

// lookupBuiltin accepts both "echo" and "core.echo".
func lookupBuiltin(name string) (builtin, bool) {
	name = strings.TrimPrefix(name, "core.")
	for _, b := range builtins {
		if b.spec.Name == name {
			return b, true
		}
	}
	return builtin{}, false
}

// runBuiltin dispatches a builtin and turns its error into an outcome.
func (r *Runner) runBuiltin(ctx context.Context, req Request) (out Outcome) {
	name := req.Entrypoint
	if name == "" {
		name = req.ActionRef
	}
	b, ok := lookupBuiltin(name)
	if !ok {
		return failed(fmt.Sprintf("unknown builtin %q", name))
	}
	if b.fn == nil { // local
		cmd, err := stringParam(req.Parameters, "cmd", true)
		if err != nil {
			return failed(err.Error())
		}
		if cmd == "" {
			return failed(`parameter "cmd" must not be empty`)
		}
		return runCommand(ctx, req, []string{shPath, "-c", cmd})
	}
	// A bug in one builtin must fail its execution, not take the worker down.
	defer func() {
		if p := recover(); p != nil {
			out = failed(fmt.Sprintf("builtin %s panicked: %v", b.spec.Name, p))
		}
	}()
	res, err := b.fn(ctx, r, req)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, req)
		}
		return failed(err.Error())
	}
	return Outcome{Status: Succeeded, Result: res}
}

func runNoop(context.Context, *Runner, Request) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func runEcho(_ context.Context, _ *Runner, req Request) (json.RawMessage, error) {
	msg, err := stringParam(req.Parameters, "message", true)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"message": msg})
}

// maxSleepSeconds is the longest sleep a time.Duration can express (~292 years).
const maxSleepSeconds = math.MaxInt64 / int64(time.Second)

func runSleep(ctx context.Context, _ *Runner, req Request) (json.RawMessage, error) {
	secs, _, err := numberParam(req.Parameters, "seconds", true)
	if err != nil {
		return nil, err
	}
	if secs < 0 || secs > float64(maxSleepSeconds) {
		return nil, fmt.Errorf(`parameter "seconds" must be between 0 and %d`, maxSleepSeconds)
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.Marshal(map[string]float64{"slept": secs})
}

// stringParam reads a string parameter; absent is an error only if required.
func stringParam(params map[string]any, name string, required bool) (string, error) {
	v, ok := params[name]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("parameter %q is required", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("parameter %q must be a string, got %T", name, v)
	}
	return s, nil
}

// numberParam reads a finite number parameter, accepting what JSON decoding
// (float64, json.Number) and Go callers (ints) produce. present is false when
// the parameter is absent and not required.
func numberParam(params map[string]any, name string, required bool) (val float64, present bool, err error) {
	v, ok := params[name]
	if !ok || v == nil {
		if required {
			return 0, false, fmt.Errorf("parameter %q is required", name)
		}
		return 0, false, nil
	}
	switch x := v.(type) {
	case float64:
		val = x
	case float32:
		val = float64(x)
	case int:
		val = float64(x)
	case int64:
		val = float64(x)
	case int32:
		val = float64(x)
	case json.Number:
		if val, err = x.Float64(); err != nil {
			return 0, true, fmt.Errorf("parameter %q must be a number: %v", name, err)
		}
	default:
		return 0, true, fmt.Errorf("parameter %q must be a number, got %T", name, v)
	}
	if math.IsNaN(val) || math.IsInf(val, 0) {
		return 0, true, fmt.Errorf("parameter %q must be a finite number", name)
	}
	return val, true, nil
}
