package ui

import (
	"net/url"
	"strconv"
	"time"
)

// ExecutionsPage is the model of /executions.
type ExecutionsPage struct {
	Layout   LayoutProps
	Now      time.Time
	Filter   ExecutionFilter
	Statuses []string // the status filter's choices
	Actions  []string // the action filter's choices
	Rows     []ExecutionRow
	Pager    PagerProps
}

// ExecutionFilter is the list's filter as given in the query string.
type ExecutionFilter struct {
	Status string
	Action string
	Before int64
}

// Active reports whether any filter narrows the list.
func (f ExecutionFilter) Active() bool { return f.Status != "" || f.Action != "" }

// URL is /executions with this filter (and cursor) in the query string.
func (f ExecutionFilter) URL() string {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if f.Before > 0 {
		q.Set("before", strconv.FormatInt(f.Before, 10))
	}
	if len(q) == 0 {
		return "/executions"
	}
	return "/executions?" + q.Encode()
}

// ExecutionRow is one line of the executions list.
type ExecutionRow struct {
	ID        int64
	ActionRef string
	Status    string
	Reason    string
	GroupKey  string
	Worker    string
	CreatedAt time.Time
	// Took is the run time when known (finished, or running so far).
	Took *time.Duration
}

// ExecutionURL is the detail page of execution id.
func ExecutionURL(id int64) string { return "/executions/" + strconv.FormatInt(id, 10) }
