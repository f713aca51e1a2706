package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker/runtime"
)

// Runtimes lists the runtime names an action may use, in the order error
// messages show them.
var Runtimes = []string{runtime.Builtin, runtime.Shell, runtime.Python, runtime.Node}

// retryOnValues lists the accepted retry.retry_on entries.
var retryOnValues = []string{RetryOnWorkerLost, RetryOnQueueExpired, RetryOnTimeout, RetryOnFailed}

// On-limit behaviours of policy.concurrency.on_limit.
const (
	OnLimitEnqueue = "enqueue"
	OnLimitCancel  = "cancel"
)

// namePattern is the shape of a pack ref and of an action name. Refs appear
// in URLs, CLI arguments and queue names, so they stay plain.
var namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,100}$`)

// nameRule is the message for a name that does not match namePattern.
const nameRule = "must be 1-100 lowercase letters, digits, '_' or '-'"

// ValidName reports whether s is a valid pack ref or action name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// SplitRef splits an action ref "pack.name" and checks both parts.
func SplitRef(ref string) (pack, name string, err error) {
	pack, name, ok := strings.Cut(ref, ".")
	if !ok {
		return "", "", fmt.Errorf("must be pack.name, got %q", ref)
	}
	if !ValidName(pack) {
		return "", "", fmt.Errorf("pack %q %s", pack, nameRule)
	}
	if !ValidName(name) {
		return "", "", fmt.Errorf("name %q %s", name, nameRule)
	}
	return pack, name, nil
}

// ToAction validates the spec and converts it to a store.Action.
//
// pack is the pack the action belongs to; when "" it is taken from the ref
// (API registration). packDir is the pack's root directory and baseDir the
// directory of the action file, against which a relative entrypoint is
// resolved (packDir when ""). Script entrypoints must exist and lie inside
// packDir. With packDir "" (an action registered through the API) only
// builtin actions or an absolute path to an existing file are accepted, since
// there is no pack directory to look in.
//
// A builtin action without parameters or description inherits the builtin's.
// Errors are a *SpecError listing every bad field.
func (s ActionSpec) ToAction(pack string, packDir string, baseDir string) (store.Action, error) {
	d := &decoder{}
	a := store.Action{Description: s.Description, Runtime: s.Runtime, PackPath: packDir}
	a.Pack, a.Name = d.ref(s.Ref, pack)
	if a.Pack != "" && a.Name != "" {
		a.Ref = a.Pack + "." + a.Name
	}

	schema := s.Parameters
	switch s.Runtime {
	case runtime.Builtin:
		if b, ok := d.builtin(s.Entrypoint); ok {
			a.Entrypoint = b.Name
			if isEmptyJSON(schema) {
				schema = b.Parameters
			}
			if a.Description == "" {
				a.Description = b.Description
			}
		}
	case runtime.Shell, runtime.Python, runtime.Node:
		a.Entrypoint = d.entrypoint(s.Entrypoint, s.Runtime, a.Pack, packDir, baseDir)
	case "":
		d.fail("runtime", "is required: one of %s", strings.Join(Runtimes, ", "))
	default:
		d.fail("runtime", "must be one of %s", strings.Join(Runtimes, ", "))
	}

	a.Parameters = json.RawMessage(`{}`)
	if !isEmptyJSON(schema) {
		if _, err := params.Compile(schema); err != nil {
			d.fail("parameters", "%v", err)
		} else {
			var buf bytes.Buffer
			if json.Compact(&buf, schema) == nil {
				a.Parameters = buf.Bytes()
			}
		}
	}

	if s.Timeout < 0 || math.IsNaN(float64(s.Timeout)) || math.IsInf(float64(s.Timeout), 0) {
		d.fail("timeout", "must be a non-negative number of seconds (0 = none)")
	}
	a.TimeoutSeconds = float64(s.Timeout)
	a.Policy = d.toPolicy(s.Policy, "policy")
	a.Retry = d.toRetry(s.Retry, "retry")

	if err := d.err(); err != nil {
		return store.Action{}, err
	}
	return a, nil
}

// ActionFromJSON decodes and converts an action registered through the API
// (POST /api/v1/actions): like json.Unmarshal followed by ToAction(""...),
// but a *SpecError lists the decoding and the validation problems together.
func ActionFromJSON(b []byte) (store.Action, error) {
	tree, err := decodeJSONTree(b)
	if err != nil {
		return store.Action{}, &SpecError{Fields: []params.FieldError{{Message: err.Error()}}}
	}
	return convertTree(tree, "", "", "")
}

// convertTree decodes a document and converts it, reporting decoding and
// validation problems in one list. A field that failed to decode is left
// zero in the spec, so its validation complaint would only repeat it and is
// dropped.
func convertTree(tree any, pack, packDir, baseDir string) (store.Action, error) {
	d := &decoder{}
	spec := d.actionSpec(tree)
	a, err := spec.ToAction(pack, packDir, baseDir)
	if len(d.errs) == 0 {
		return a, err
	}
	var se *SpecError
	if errors.As(err, &se) {
		for _, f := range se.Fields {
			if !slices.ContainsFunc(d.errs, func(e params.FieldError) bool { return e.Field == f.Field }) {
				d.errs = append(d.errs, f)
			}
		}
	}
	return store.Action{}, d.err()
}

// ToPolicy validates a policy on its own (PUT /api/v1/actions/{ref}/policy).
// Errors are a *SpecError with fields relative to the policy ("concurrency.limit").
func (p PolicySpec) ToPolicy() (store.Policy, error) {
	d := &decoder{}
	pol := d.toPolicy(p, "")
	if err := d.err(); err != nil {
		return store.Policy{}, err
	}
	return pol, nil
}

// ref checks the action ref against the pack and returns its parts.
func (d *decoder) ref(ref, pack string) (string, string) {
	if ref == "" {
		d.fail("ref", "is required (pack.name, or name inside a pack)")
		return "", ""
	}
	refPack, name, dotted := strings.Cut(ref, ".")
	if !dotted {
		name, refPack = ref, pack
		if pack == "" {
			d.fail("ref", "must be pack.name, got %q", ref)
			return "", ""
		}
	} else if pack != "" && refPack != pack {
		d.fail("ref", "pack prefix %q does not match pack %q", refPack, pack)
		return "", ""
	}
	ok := true
	if !ValidName(refPack) {
		d.fail("ref", "pack %q %s", refPack, nameRule)
		ok = false
	}
	if !ValidName(name) {
		d.fail("ref", "name %q %s", name, nameRule)
		ok = false
	}
	if !ok {
		return "", ""
	}
	return refPack, name
}

// builtin finds the builtin an entrypoint names ("echo" or "core.echo").
func (d *decoder) builtin(entry string) (runtime.BuiltinSpec, bool) {
	all := runtime.Builtins()
	names := make([]string, len(all))
	for i, b := range all {
		names[i] = b.Name
		if b.Name == strings.TrimPrefix(entry, "core.") {
			return b, true
		}
	}
	if entry == "" {
		d.fail("entrypoint", "is required for runtime builtin: one of %s", strings.Join(names, ", "))
	} else {
		d.fail("entrypoint", "unknown builtin %q: one of %s", entry, strings.Join(names, ", "))
	}
	return runtime.BuiltinSpec{}, false
}

// toPolicy validates a policy; path prefixes the field names.
func (d *decoder) toPolicy(p PolicySpec, path string) store.Policy {
	var out store.Policy
	if c := p.Concurrency; c != nil {
		cpath := join(path, "concurrency")
		if c.Limit != nil && *c.Limit < 1 {
			d.fail(join(cpath, "limit"), "must be positive")
		}
		out.Concurrency.Limit = c.Limit
		for i, g := range c.GroupBy {
			if g == "" || slices.Contains(strings.Split(g, "."), "") {
				d.fail(fmt.Sprintf("%s.%d", join(cpath, "group_by"), i), "must be a dotted parameter path like \"db\" or \"target.host\", got %q", g)
			} else if slices.Contains(c.GroupBy[:i], g) {
				d.fail(fmt.Sprintf("%s.%d", join(cpath, "group_by"), i), "duplicate path %q", g)
			}
		}
		out.Concurrency.GroupBy = c.GroupBy
		switch c.OnLimit {
		case "", OnLimitEnqueue, OnLimitCancel:
			out.Concurrency.OnLimit = c.OnLimit
		default:
			d.fail(join(cpath, "on_limit"), "must be one of %s, %s", OnLimitEnqueue, OnLimitCancel)
		}
		if out.Concurrency.OnLimit == "" && c.Limit != nil {
			out.Concurrency.OnLimit = OnLimitEnqueue // say what will happen rather than leave it implicit
		}
	}
	if n := p.MaxQueueLength; n != nil {
		if *n < 1 {
			d.fail(join(path, "max_queue_length"), "must be positive")
		}
		out.MaxQueueLength = n
	}
	if t := p.QueueTimeout; t != nil {
		// Stored as whole seconds; a fractional value would be silently changed.
		if *t < 1 || float64(*t) != math.Trunc(float64(*t)) || *t > math.MaxInt32 {
			d.fail(join(path, "queue_timeout"), "must be a positive whole number of seconds")
		} else {
			n := int(*t)
			out.QueueTimeout = &n
		}
	}
	if r := p.RateLimit; r != nil {
		rpath := join(path, "rate_limit")
		if r.Max < 1 {
			d.fail(join(rpath, "max"), "must be positive")
		}
		if !(r.Window > 0) || math.IsInf(float64(r.Window), 0) {
			d.fail(join(rpath, "window"), "must be a positive duration")
		}
		out.RateLimit = &store.RateLimit{Max: r.Max, Window: float64(r.Window)}
	}
	return out
}

// toRetry validates a retry spec, fills its defaults and encodes it.
func (d *decoder) toRetry(r *RetrySpec, path string) json.RawMessage {
	if r == nil {
		return nil
	}
	rs := *r
	if rs.Backoff.Initial == 0 {
		rs.Backoff.Initial = DefaultBackoffInitial
	}
	if rs.Backoff.Max == 0 {
		rs.Backoff.Max = DefaultBackoffMax
	}
	if rs.Backoff.Multiplier == 0 {
		rs.Backoff.Multiplier = DefaultBackoffMultiplier
	}
	if rs.MaxRetries < 0 {
		d.fail(join(path, "max_retries"), "must not be negative")
	}
	bpath := join(path, "backoff")
	if rs.Backoff.Initial < 0 {
		d.fail(join(bpath, "initial"), "must be positive")
	}
	if rs.Backoff.Max < rs.Backoff.Initial {
		d.fail(join(bpath, "max"), "must be at least backoff.initial (%gs)", float64(rs.Backoff.Initial))
	}
	if rs.Backoff.Multiplier < 1 {
		d.fail(join(bpath, "multiplier"), "must be at least 1")
	}
	for i, on := range rs.RetryOn {
		if !slices.Contains(retryOnValues, on) {
			d.fail(fmt.Sprintf("%s.%d", join(path, "retry_on"), i), "must be one of %s", strings.Join(retryOnValues, ", "))
		}
	}
	if rs.MaxRetries > 0 && len(rs.RetryOn) == 0 {
		// Retrying can run an action twice; which outcomes justify that is
		// the author's call, so there is no silent default.
		d.fail(join(path, "retry_on"), "must list when to retry: any of %s", strings.Join(retryOnValues, ", "))
	}
	if rs.RetryOn == nil {
		rs.RetryOn = []string{} // stored as [] rather than null: "retry on nothing"
	}
	b, err := json.Marshal(rs)
	if err != nil {
		d.fail(path, "%v", err)
		return nil
	}
	return b
}

// isEmptyJSON reports whether a raw schema is absent, null or {}.
func isEmptyJSON(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(t, &m) == nil && len(m) == 0
}

// ActionToSpec converts a stored action back to its spec form, e.g. for GET
// responses or to edit and re-register it. Script entrypoints are absolute,
// which ToAction accepts for the same pack directory.
func ActionToSpec(a store.Action) ActionSpec {
	s := ActionSpec{
		Ref: a.Ref, Description: a.Description, Runtime: a.Runtime, Entrypoint: a.Entrypoint,
		Parameters: a.Parameters, Timeout: Seconds(a.TimeoutSeconds), Policy: PolicyToSpec(a.Policy),
	}
	if len(a.Retry) > 0 {
		var r RetrySpec
		if json.Unmarshal(a.Retry, &r) == nil {
			s.Retry = &r
		}
	}
	return s
}

// PolicyToSpec converts a stored policy back to its spec form.
func PolicyToSpec(p store.Policy) PolicySpec {
	var s PolicySpec
	c := p.Concurrency
	if c.Limit != nil || len(c.GroupBy) > 0 || c.OnLimit != "" {
		s.Concurrency = &ConcurrencySpec{Limit: c.Limit, GroupBy: c.GroupBy, OnLimit: c.OnLimit}
	}
	s.MaxQueueLength = p.MaxQueueLength
	if p.QueueTimeout != nil {
		t := Seconds(*p.QueueTimeout)
		s.QueueTimeout = &t
	}
	if p.RateLimit != nil {
		s.RateLimit = &RateLimitSpec{Max: p.RateLimit.Max, Window: Seconds(p.RateLimit.Window)}
	}
	return s
}
