package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/attune-io/attune/ui"
)

// queues serves /queues: every action with its policy controls and its
// (action, group) queues.
func (u *uiServer) queues(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	actions, err := u.reader.ListActions(ctx)
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	qs, err := u.reader.QueueStats(ctx, "")
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	p := ui.QueuesPage{Layout: u.layout(w, r, ui.NavQueues, "Queues"), Now: u.now()}
	byRef := map[string]int{}
	for _, a := range actions {
		byRef[a.Ref] = len(p.Actions)
		p.Actions = append(p.Actions, ui.ActionQueues{Ref: a.Ref, Limit: a.Policy.Concurrency.Limit,
			Paused: a.Policy.Paused, GroupBy: a.Policy.Concurrency.GroupBy})
	}
	for _, q := range qs {
		i, ok := byRef[q.ActionRef]
		if !ok { // a queue of an action deleted since
			i = len(p.Actions)
			byRef[q.ActionRef] = i
			p.Actions = append(p.Actions, ui.ActionQueues{Ref: q.ActionRef, Limit: q.Limit, Paused: q.Paused})
		}
		p.Actions[i].Queues = append(p.Actions[i].Queues, queueRow(q))
	}
	u.render(w, r, http.StatusOK, ui.QueuesView(p))
}

// queuesURL points back at one action's card.
func queuesURL(ref string) string { return "/queues#" + url.PathEscape(ref) }

// setPaused pauses or resumes an action's queues.
func (u *uiServer) setPaused(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ref := strings.TrimSpace(r.PostFormValue("ref"))
		_, err := u.engine.SetPaused(r.Context(), ref, paused)
		verb := "Resumed"
		if paused {
			verb = "Paused"
		}
		u.done(w, r, queuesURL(ref), err, verb+" "+ref+".")
	}
}

// setLimit changes an action's concurrency limit (empty = unlimited),
// keeping the rest of its policy.
func (u *uiServer) setLimit(w http.ResponseWriter, r *http.Request) {
	ref := strings.TrimSpace(r.PostFormValue("ref"))
	raw := strings.TrimSpace(r.PostFormValue("limit"))
	var limit *int
	if raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 100000 {
			u.done(w, r, queuesURL(ref), userError("The limit must be a whole number from 1 to 100000, or empty for no limit."), "")
			return
		}
		limit = &n
	}
	act, err := u.reader.GetAction(r.Context(), ref)
	if err != nil {
		u.done(w, r, queuesURL(ref), err, "")
		return
	}
	pol := act.Policy
	pol.Concurrency.Limit = limit
	_, err = u.engine.SetPolicy(r.Context(), ref, pol)
	u.done(w, r, queuesURL(ref), err, fmt.Sprintf("Limit of %s set to %s.", ref, ui.LimitText(limit)))
}
