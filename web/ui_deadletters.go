package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// deadLettersPerPage is the length of a page of /dead-letters.
const deadLettersPerPage = 50

// maxFormBulk bounds how many dead letters one form submits.
const maxFormBulk = 500

// deadLetters serves /dead-letters, newest first, keyset-paginated.
func (u *uiServer) deadLetters(w http.ResponseWriter, r *http.Request) {
	p := ui.DeadLettersPage{Layout: u.layout(w, r, ui.NavDeadLetters, "Dead letters"), Now: u.now()}
	if u.letters == nil {
		p.Unavailable = "This appliance keeps no dead-letter records."
		u.render(w, r, http.StatusOK, ui.DeadLettersView(p))
		return
	}
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	items, next, err := u.letters.ListDeadLetters(r.Context(), store.DeadLetterFilter{Before: max(before, 0), Limit: deadLettersPerPage})
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	for _, d := range items {
		p.Letters = append(p.Letters, ui.DeadLetterRow{ID: d.ID, Reason: d.Reason, Queue: d.Queue, RoutingKey: d.RoutingKey,
			MessageType: d.MessageType, DeathCount: d.DeathCount, ExecutionID: d.ExecutionID, CreatedAt: d.CreatedAt,
			Payload: payloadText(d.Payload), Headers: prettyJSON(d.Headers), ReplayedAt: d.ReplayedAt,
			ReplayExecutionID: d.ReplayExecutionID})
	}
	if before > 0 {
		p.Pager.FirstURL = "/dead-letters"
	}
	if next > 0 {
		p.Pager.NextURL = "/dead-letters?before=" + strconv.FormatInt(next, 10)
	}
	u.render(w, r, http.StatusOK, ui.DeadLettersView(p))
}

// payloadText shows a message body: indented JSON, text, or a note for
// binary data.
func payloadText(b []byte) string {
	if json.Valid(b) {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return buf.String()
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes of binary data)", len(b))
}

// deadLetterOp replays or discards the dead letter in the path, or the
// ones ticked in the form (id=…, repeated).
func (u *uiServer) deadLetterOp(w http.ResponseWriter, r *http.Request) {
	op := chi.URLParam(r, "op")
	if op != "replay" && op != "discard" {
		u.renderError(w, r, http.StatusNotFound, "Not found", "Unknown dead-letter action.")
		return
	}
	var ids []int64
	if raw := chi.URLParam(r, "id"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			u.renderError(w, r, http.StatusNotFound, "Not found", "Dead-letter ids are positive whole numbers.")
			return
		}
		ids = []int64{id}
	} else {
		_ = r.ParseForm()
		for _, v := range r.PostForm["id"] {
			if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 && len(ids) < maxFormBulk {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		u.done(w, r, "/dead-letters", userError("Select at least one dead letter first."), "")
		return
	}
	switch {
	case u.letters == nil:
		u.done(w, r, "/dead-letters", userError("This appliance keeps no dead-letter records."), "")
	case op == "discard":
		gone, err := u.letters.DeleteDeadLetters(r.Context(), ids)
		u.done(w, r, "/dead-letters", err, fmt.Sprintf("Discarded %d dead %s.", len(gone), plural(len(gone), "letter", "letters")))
	case u.replayer == nil:
		u.done(w, r, "/dead-letters", userError("Replaying needs the API role on this appliance."), "")
	default:
		u.replay(w, r, ids)
	}
}

// replay replays each dead letter and reports what happened to each.
func (u *uiServer) replay(w http.ResponseWriter, r *http.Request, ids []int64) {
	var ok []string
	var failed []string
	for _, id := range ids {
		d, err := u.replayer.ReplayDeadLetter(r.Context(), id)
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("#%d: %s", id, u.actionError(r, err)))
		case d.ReplayExecutionID != nil:
			ok = append(ok, fmt.Sprintf("#%d as execution %d", id, *d.ReplayExecutionID))
		default:
			ok = append(ok, fmt.Sprintf("#%d", id))
		}
	}
	var msg strings.Builder
	if len(ok) > 0 {
		fmt.Fprintf(&msg, "Replayed %s. ", strings.Join(ok, ", "))
	}
	if len(failed) > 0 {
		fmt.Fprintf(&msg, "Not replayed: %s.", strings.Join(failed, "; "))
	}
	var err error
	if len(failed) > 0 {
		err = userError(strings.TrimSpace(msg.String()))
	}
	u.done(w, r, "/dead-letters", err, strings.TrimSpace(msg.String()))
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
