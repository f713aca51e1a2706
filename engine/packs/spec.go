// Package packs reads action definitions (pack directories of YAML files, or
// the same fields as JSON from the API), validates them with field-level
// errors, and turns them into store.Actions. It also defines the built-in
// core pack from the worker runtime's builtins, so the catalogue and the code
// that runs an action cannot disagree about its parameters.
package packs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/attune-io/attune/engine/params"
)

// ActionSpec is the YAML/JSON form of an action; YAML files and
// POST /api/v1/actions use the same field names. Decoding is strict: an
// unknown field is an error (a typo like "timout" must not be ignored), and
// every bad field is reported at once as a *SpecError.
type ActionSpec struct {
	// Ref is "pack.name", or just "name" inside a pack directory.
	Ref string `json:"ref" yaml:"ref"`
	// Description is shown in the catalogue.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Runtime is builtin, shell, python or node.
	Runtime string `json:"runtime" yaml:"runtime"`
	// Entrypoint is a script path relative to the action file (or absolute
	// inside the pack), or for builtin the builtin's name ("echo").
	Entrypoint string `json:"entrypoint,omitempty" yaml:"entrypoint,omitempty"`
	// Parameters is the JSON Schema of the parameters object.
	Parameters json.RawMessage `json:"parameters,omitempty" yaml:"parameters,omitempty"`
	// Timeout bounds a run; 0 means none.
	Timeout Seconds `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Policy is the admission policy.
	Policy PolicySpec `json:"policy,omitzero" yaml:"policy,omitempty"`
	// Retry, when set, retries failed runs per RetrySpec.
	Retry *RetrySpec `json:"retry,omitempty" yaml:"retry,omitempty"`
}

// PolicySpec is an action's admission policy as written by users. Nil fields
// mean "use the configured default" (queue length, queue timeout) or "no
// limit" (concurrency, rate).
type PolicySpec struct {
	// Concurrency bounds how many executions run at once, per group.
	Concurrency *ConcurrencySpec `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	// MaxQueueLength bounds waiting executions; the next request gets 429.
	MaxQueueLength *int `json:"max_queue_length,omitempty" yaml:"max_queue_length,omitempty"`
	// QueueTimeout cancels executions that waited longer (whole seconds).
	QueueTimeout *Seconds `json:"queue_timeout,omitempty" yaml:"queue_timeout,omitempty"`
	// RateLimit admits at most Max executions per Window.
	RateLimit *RateLimitSpec `json:"rate_limit,omitempty" yaml:"rate_limit,omitempty"`
}

// ConcurrencySpec is policy.concurrency.
type ConcurrencySpec struct {
	// Limit is the number of executions that may run at once per group.
	Limit *int `json:"limit,omitempty" yaml:"limit,omitempty"`
	// GroupBy lists dotted parameter paths; each distinct tuple of values
	// is its own queue with its own limit.
	GroupBy []string `json:"group_by,omitempty" yaml:"group_by,omitempty"`
	// OnLimit is "enqueue" (wait in FIFO order, the default) or "cancel".
	OnLimit string `json:"on_limit,omitempty" yaml:"on_limit,omitempty"`
}

// RateLimitSpec is policy.rate_limit.
type RateLimitSpec struct {
	// Max is how many executions may be admitted per window.
	Max int `json:"max" yaml:"max"`
	// Window is the length of the window.
	Window Seconds `json:"window" yaml:"window"`
}

// RetrySpec says when and how often a failed execution is retried.
type RetrySpec struct {
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int `json:"max_retries" yaml:"max_retries"`
	// Backoff spaces the retries.
	Backoff BackoffSpec `json:"backoff" yaml:"backoff"`
	// RetryOn lists the outcomes that trigger a retry: worker_lost,
	// queue_expired, timeout, failed.
	RetryOn []string `json:"retry_on" yaml:"retry_on"`
}

// BackoffSpec is an exponential backoff: Initial, then ×Multiplier up to Max.
type BackoffSpec struct {
	// Initial is the first delay (default 1s).
	Initial Seconds `json:"initial" yaml:"initial"`
	// Max caps the delay (default 60s).
	Max Seconds `json:"max" yaml:"max"`
	// Multiplier grows the delay after each retry (default 2).
	Multiplier float64 `json:"multiplier" yaml:"multiplier"`
}

// Retry defaults, applied when a field is left out.
const (
	DefaultBackoffInitial    Seconds = 1
	DefaultBackoffMax        Seconds = 60
	DefaultBackoffMultiplier         = 2.0
)

// RetryOn values.
const (
	RetryOnWorkerLost   = "worker_lost"
	RetryOnQueueExpired = "queue_expired"
	RetryOnTimeout      = "timeout"
	RetryOnFailed       = "failed"
)

// Seconds is a duration in seconds. It decodes from a number (12, 1.5), a
// numeric string ("12") or a Go duration string ("30s", "5m", "1h30m"), in
// JSON and YAML alike, and encodes as a plain number of seconds.
type Seconds float64

// Duration converts to a time.Duration.
func (s Seconds) Duration() time.Duration {
	return time.Duration(float64(s) * float64(time.Second))
}

// secondsHint is the message for a value that is not a duration.
const secondsHint = `must be seconds (e.g. 30 or 1.5) or a duration (e.g. "30s", "5m")`

// ParseSeconds interprets a decoded JSON or YAML value as Seconds.
func ParseSeconds(v any) (Seconds, error) {
	if f, ok := toFloat(v); ok {
		return Seconds(f), nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%s, got %s", secondsHint, kindOf(v))
	}
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return Seconds(f), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s, got %q", secondsHint, s)
	}
	return Seconds(d.Seconds()), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	v, err := decodeJSONTree(b)
	if err != nil {
		return err
	}
	parsed, err := ParseSeconds(v)
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Seconds) UnmarshalYAML(node *yaml.Node) error {
	var v any
	if err := node.Decode(&v); err != nil {
		return err
	}
	parsed, err := ParseSeconds(v)
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// SpecError lists every invalid field of an action definition, by dotted
// name ("policy.concurrency.limit"), so a user fixes them all in one pass.
type SpecError struct {
	Fields []params.FieldError
}

// Error joins the fields: "invalid action: runtime: must be one of ...".
func (e *SpecError) Error() string {
	return "invalid action: " + params.JoinFields(e.Fields)
}

// UnmarshalJSON decodes strictly; errors are a *SpecError naming the fields.
func (s *ActionSpec) UnmarshalJSON(b []byte) error {
	tree, err := decodeJSONTree(b)
	if err != nil {
		return &SpecError{Fields: []params.FieldError{{Message: err.Error()}}}
	}
	return s.fromTree(tree)
}

// UnmarshalYAML decodes strictly; errors are a *SpecError naming the fields.
func (s *ActionSpec) UnmarshalYAML(node *yaml.Node) error {
	var tree any
	if err := node.Decode(&tree); err != nil {
		return err
	}
	return s.fromTree(tree)
}

// fromTree fills s from a decoded document or returns a *SpecError.
func (s *ActionSpec) fromTree(tree any) error {
	d := &decoder{}
	spec := d.actionSpec(tree)
	if err := d.err(); err != nil {
		return err
	}
	*s = spec
	return nil
}

// UnmarshalJSON decodes a policy strictly (PUT /api/v1/actions/{ref}/policy);
// errors are a *SpecError with fields relative to the policy.
func (p *PolicySpec) UnmarshalJSON(b []byte) error {
	tree, err := decodeJSONTree(b)
	if err != nil {
		return &SpecError{Fields: []params.FieldError{{Message: err.Error()}}}
	}
	d := &decoder{}
	spec := d.policy(tree, "")
	if err := d.err(); err != nil {
		return err
	}
	*p = spec
	return nil
}

// specYAML mirrors ActionSpec for encoding, with Parameters as a YAML tree
// instead of bytes (yaml.v3 would write json.RawMessage as a byte list).
type specYAML struct {
	Ref         string     `yaml:"ref"`
	Description string     `yaml:"description,omitempty"`
	Runtime     string     `yaml:"runtime"`
	Entrypoint  string     `yaml:"entrypoint,omitempty"`
	Parameters  any        `yaml:"parameters,omitempty"`
	Timeout     Seconds    `yaml:"timeout,omitempty"`
	Policy      PolicySpec `yaml:"policy,omitempty"`
	Retry       *RetrySpec `yaml:"retry,omitempty"`
}

// MarshalYAML implements yaml.Marshaler so specs round-trip through YAML.
func (s ActionSpec) MarshalYAML() (any, error) {
	out := specYAML{Ref: s.Ref, Description: s.Description, Runtime: s.Runtime, Entrypoint: s.Entrypoint,
		Timeout: s.Timeout, Policy: s.Policy, Retry: s.Retry}
	if len(bytes.TrimSpace(s.Parameters)) > 0 {
		if err := json.Unmarshal(s.Parameters, &out.Parameters); err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
	}
	return out, nil
}

// decodeJSONTree decodes one JSON value keeping numbers exact.
func decodeJSONTree(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not valid JSON: unexpected data after the value")
	}
	return v, nil
}
