package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/attune-io/attune/engine/packs"
	"github.com/attune-io/attune/engine/store"
)

// Bounds of policy values (their columns are 32-bit integers; a window of
// more than a year is surely a mistake).
const (
	maxPolicyInt      = math.MaxInt32
	maxRateWindowSecs = 365 * 24 * 3600
)

// listActions serves {"items": [...]} of every registered action.
func (a *api) listActions(w http.ResponseWriter, r *http.Request) {
	acts, err := a.reader.ListActions(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]actionView, 0, len(acts))
	for _, act := range acts {
		out = append(out, viewAction(act))
	}
	writeJSON(w, http.StatusOK, newList(out))
}

// lookupAction loads the {ref} action, writing 404 when it does not exist.
func (a *api) lookupAction(w http.ResponseWriter, r *http.Request) (store.Action, bool) {
	ref := pathParam(r, "ref")
	act, err := a.reader.GetAction(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "unknown action", map[string]string{"action_ref": ref})
		return act, false
	}
	if err != nil {
		a.fail(w, r, err)
		return act, false
	}
	return act, true
}

// getAction serves one action.
func (a *api) getAction(w http.ResponseWriter, r *http.Request) {
	if act, ok := a.lookupAction(w, r); ok {
		writeJSON(w, http.StatusOK, viewAction(act))
	}
}

// registerAction registers or replaces an action from the JSON form of the
// pack YAML (packs.ActionSpec): 201 with the action, 400 with one message
// per bad field.
func (a *api) registerAction(w http.ResponseWriter, r *http.Request) {
	var spec packs.ActionSpec
	if err := readBody(w, r, &spec); err != nil {
		var serr *packs.SpecError
		if errors.As(err, &serr) {
			writeFieldErrors(w, "invalid action", serr)
		} else {
			writeBodyError(w, err)
		}
		return
	}
	act, err := spec.ToAction("", "", "") // pack from the ref; no pack directory
	if serr := (*packs.SpecError)(nil); errors.As(err, &serr) {
		writeFieldErrors(w, "invalid action", serr)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid action", err.Error())
		return
	}
	if fields := validatePolicy(act.Policy, "policy."); len(fields) > 0 {
		writeError(w, http.StatusBadRequest, "invalid action", fields)
		return
	}
	saved, err := a.engine.RegisterAction(r.Context(), act)
	if errors.Is(err, store.ErrNotFound) {
		// The action's pack does not exist yet (packs come from disk): create
		// an empty one and retry. Only a missing pack fails this way, so an
		// existing pack's description and path are never overwritten.
		if pc, ok := a.reader.(packCreator); ok {
			if err = pc.UpsertPack(r.Context(), store.Pack{Ref: act.Pack}); err == nil {
				saved, err = a.engine.RegisterAction(r.Context(), act)
			}
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewAction(saved))
}

// writeFieldErrors answers 400 msg with one message per field.
func writeFieldErrors(w http.ResponseWriter, msg string, serr *packs.SpecError) {
	fields := make([]fieldError, 0, len(serr.Fields))
	for _, f := range serr.Fields {
		fields = append(fields, fieldError{Field: f.Field, Message: f.Message})
	}
	writeError(w, http.StatusBadRequest, msg, fields)
}

// getPolicy serves an action's admission policy.
func (a *api) getPolicy(w http.ResponseWriter, r *http.Request) {
	if act, ok := a.lookupAction(w, r); ok {
		writeJSON(w, http.StatusOK, act.Policy)
	}
}

// putPolicy replaces an action's policy: 200 with the policy now in force.
// The body is the policy as GET returns it; fields are validated like the
// pack YAML's policy (packs.PolicySpec), and "paused", when left out, keeps
// the current state.
func (a *api) putPolicy(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	if !decodeBody(w, r, &raw) {
		return
	}
	if raw == nil {
		writeError(w, http.StatusBadRequest, "invalid policy", []fieldError{{Field: "(body)", Message: "must be an object, got null"}})
		return
	}
	var paused *bool
	if v, ok := raw["paused"]; ok {
		delete(raw, "paused")
		if err := json.Unmarshal(v, &paused); err != nil {
			writeError(w, http.StatusBadRequest, "invalid policy", []fieldError{{Field: "paused", Message: "must be true or false"}})
			return
		}
	}
	rest, err := json.Marshal(raw)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	var spec packs.PolicySpec
	var p store.Policy
	if err = json.Unmarshal(rest, &spec); err == nil {
		p, err = spec.ToPolicy()
	}
	if serr := (*packs.SpecError)(nil); errors.As(err, &serr) {
		writeFieldErrors(w, "invalid policy", serr)
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "invalid policy", err.Error())
		return
	}
	if fields := validatePolicy(p, ""); len(fields) > 0 {
		writeError(w, http.StatusBadRequest, "invalid policy", fields)
		return
	}
	act, ok := a.lookupAction(w, r)
	if !ok {
		return
	}
	p.Paused = act.Policy.Paused
	if paused != nil {
		p.Paused = *paused
	}
	got, err := a.engine.SetPolicy(r.Context(), act.Ref, p)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "unknown action", map[string]string{"action_ref": act.Ref})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

// validatePolicy returns one message per bad field, each named with prefix.
func validatePolicy(p store.Policy, prefix string) []fieldError {
	var out []fieldError
	bad := func(field, msg string) { out = append(out, fieldError{Field: prefix + field, Message: msg}) }
	positive := func(field string, v *int) {
		switch {
		case v == nil:
		case *v <= 0:
			bad(field, "must be greater than 0")
		case *v > maxPolicyInt:
			bad(field, fmt.Sprintf("must be at most %d", maxPolicyInt))
		}
	}
	positive("concurrency.limit", p.Concurrency.Limit)
	switch p.Concurrency.OnLimit {
	case "", "enqueue", "cancel":
	default:
		bad("concurrency.on_limit", fmt.Sprintf("must be enqueue or cancel, got %q", p.Concurrency.OnLimit))
	}
	for i, g := range p.Concurrency.GroupBy {
		if strings.TrimSpace(g) == "" {
			bad(fmt.Sprintf("concurrency.group_by.%d", i), "must be a parameter path, got an empty string")
		}
	}
	positive("max_queue_length", p.MaxQueueLength)
	positive("queue_timeout", p.QueueTimeout)
	if rl := p.RateLimit; rl != nil {
		mx := rl.Max
		positive("rate_limit.max", &mx)
		switch {
		case math.IsNaN(rl.Window) || rl.Window <= 0:
			bad("rate_limit.window", "must be greater than 0 (seconds)")
		case rl.Window > maxRateWindowSecs:
			bad("rate_limit.window", fmt.Sprintf("must be at most %d seconds", maxRateWindowSecs))
		}
	}
	return out
}

// setPaused pauses (nothing admitted, order kept) or resumes an action's
// queues: 200 with the policy.
func (a *api) setPaused(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ref := pathParam(r, "ref")
		p, err := a.engine.SetPaused(r.Context(), ref, paused)
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "unknown action", map[string]string{"action_ref": ref})
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	}
}

// actionQueueStats serves {"items": [...]} of the action's queues (one per
// group key).
func (a *api) actionQueueStats(w http.ResponseWriter, r *http.Request) {
	act, ok := a.lookupAction(w, r)
	if !ok {
		return
	}
	qs, err := a.reader.QueueStats(r.Context(), act.Ref)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newList(viewQueues(qs)))
}

// listQueues serves {"items": [...]} of every (action, group) queue.
func (a *api) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := a.reader.QueueStats(r.Context(), "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newList(viewQueues(qs)))
}
