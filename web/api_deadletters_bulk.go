package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/attune-io/attune/engine/store"
)

// bulkBody selects the records a bulk call acts on: either "ids" (at most
// maxBulk) or a filter of "reason" and/or "queue" (the newest maxBulk
// matching records; repeat the call for more). An empty selection is
// refused rather than read as "everything".
type bulkBody struct {
	IDs    []int64 `json:"ids"`
	Reason *string `json:"reason"`
	Queue  *string `json:"queue"`
}

// selectBulk resolves a bulk body to record ids, writing 400 for a bad
// selection. onlyUnreplayed narrows a filter to records not replayed yet.
func (a *api) selectBulk(w http.ResponseWriter, r *http.Request, dl DeadLetterReader, onlyUnreplayed bool) ([]int64, bool) {
	var b bulkBody
	if !decodeBody(w, r, &b) {
		return nil, false
	}
	hasFilter := b.Reason != nil || b.Queue != nil
	switch {
	case len(b.IDs) > 0 && hasFilter:
		writeError(w, http.StatusBadRequest, "invalid request body", "give either ids or a reason/queue filter, not both")
		return nil, false
	case len(b.IDs) > maxBulk:
		writeError(w, http.StatusBadRequest, "invalid request body",
			[]fieldError{{Field: "ids", Message: "at most " + strconv.Itoa(maxBulk) + " per call"}})
		return nil, false
	case len(b.IDs) > 0:
		for _, id := range b.IDs {
			if id <= 0 {
				writeError(w, http.StatusBadRequest, "invalid request body",
					[]fieldError{{Field: "ids", Message: "must be positive integers"}})
				return nil, false
			}
		}
		slices.Sort(b.IDs)
		return slices.Compact(b.IDs), true
	case !hasFilter:
		writeError(w, http.StatusBadRequest, "invalid request body", `give "ids" or a "reason"/"queue" filter`)
		return nil, false
	}
	f := store.DeadLetterFilter{}
	if b.Reason != nil {
		f.Reason = strings.TrimSpace(*b.Reason)
	}
	if b.Queue != nil {
		f.Queue = strings.TrimSpace(*b.Queue)
	}
	if f.Reason == "" && f.Queue == "" {
		writeError(w, http.StatusBadRequest, "invalid request body", "reason and queue must not both be empty")
		return nil, false
	}
	if onlyUnreplayed {
		no := false
		f.Replayed = &no
	}
	ids, err := dl.DeadLetterIDs(r.Context(), f, maxBulk)
	if err != nil {
		a.fail(w, r, err)
		return nil, false
	}
	return ids, true
}

// bulkReplayItem is the outcome of one record of a bulk replay.
type bulkReplayItem struct {
	ID         int64           `json:"id"`
	Replayed   bool            `json:"replayed"`
	DeadLetter *deadLetterView `json:"dead_letter,omitempty"`
	Status     int             `json:"status,omitempty"` // the HTTP status a single replay would have answered
	Error      string          `json:"error,omitempty"`
	Details    any             `json:"details,omitempty"`
}

// bulkReplay replays each selected record independently: 200 with one
// outcome per record (a failure of one does not stop the others), and the
// counts.
func (a *api) bulkReplay(w http.ResponseWriter, r *http.Request) {
	dl, ok := a.deadLetters(w)
	if !ok {
		return
	}
	rp, ok := a.engine.(DeadLetterReplayer)
	if !ok {
		writeError(w, http.StatusNotImplemented, "dead letter replay not available", nil)
		return
	}
	ids, ok := a.selectBulk(w, r, dl, true)
	if !ok {
		return
	}
	items := make([]bulkReplayItem, 0, len(ids))
	replayed := 0
	for _, id := range ids {
		if r.Context().Err() != nil {
			break
		}
		d, err := rp.ReplayDeadLetter(r.Context(), id)
		if err == nil {
			v := viewDeadLetter(d)
			items = append(items, bulkReplayItem{ID: id, Replayed: true, DeadLetter: &v})
			replayed++
			continue
		}
		status, msg, details := replayError(err)
		if status == 0 {
			a.log.Error("bulk replay failed", "dead_letter", id, "err", err)
			status, msg, details = http.StatusInternalServerError, "internal error", "see the appliance log"
		}
		items = append(items, bulkReplayItem{ID: id, Status: status, Error: msg, Details: details})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "replayed": replayed, "failed": len(items) - replayed})
}

// bulkDelete discards the selected records: 200 {"deleted": [...],
// "not_found": [...]}.
func (a *api) bulkDelete(w http.ResponseWriter, r *http.Request) {
	dl, ok := a.deadLetters(w)
	if !ok {
		return
	}
	ids, ok := a.selectBulk(w, r, dl, false)
	if !ok {
		return
	}
	deleted := []int64{}
	if len(ids) > 0 {
		gone, err := dl.DeleteDeadLetters(r.Context(), ids)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		deleted = append(deleted, gone...)
	}
	slices.Sort(deleted)
	missing := []int64{}
	for _, id := range ids {
		if _, found := slices.BinarySearch(deleted, id); !found {
			missing = append(missing, id)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted, "not_found": missing})
}
