package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// Client is a small HTTP client of a running appliance's /api/v1, used by
// the CLI (`attune run`, `attune executions …`) and the benchmark.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:8080, without a trailing slash
	Token   string       // admin API token
	HTTP    *http.Client // nil: a client with a 30 s timeout
}

// NewClient returns a client of the appliance at baseURL.
func NewClient(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// APIError is an error answer of the API: {"error": ..., "details": ...}.
type APIError struct {
	Status  int             // HTTP status code
	Message string          // the "error" field
	Details json.RawMessage // the "details" field, as sent
}

// Error renders the message and its details; field errors come one per
// line ("invalid parameters:\n  seconds: must be a number").
func (e *APIError) Error() string {
	var fields []struct{ Field, Message string }
	if json.Unmarshal(e.Details, &fields) == nil && len(fields) > 0 && fields[0].Message != "" {
		var b strings.Builder
		b.WriteString(e.Message + ":")
		for _, f := range fields {
			name := f.Field
			if name == "" {
				name = "(request)"
			}
			fmt.Fprintf(&b, "\n  %s: %s", name, f.Message)
		}
		return b.String()
	}
	var text string
	if json.Unmarshal(e.Details, &text) == nil && text != "" {
		return e.Message + " (" + text + ")"
	}
	if len(e.Details) > 0 && string(e.Details) != "null" {
		var compact bytes.Buffer
		if json.Compact(&compact, e.Details) == nil {
			return e.Message + " " + compact.String()
		}
	}
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return e.Message
}

// Do sends a request with the token; body (when not nil) is sent as JSON.
// A 2xx answer is decoded into out (when not nil) and also returned raw;
// other answers are an *APIError. A server that cannot be reached is an
// error saying so.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach attune at %s: is `attune serve` running? (%v)", c.BaseURL, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb struct {
			Error   string          `json:"error"`
			Details json.RawMessage `json:"details"`
		}
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(raw))
			if len(eb.Error) > 200 || eb.Error == "" {
				eb.Error = resp.Status
			}
		}
		return nil, &APIError{Status: resp.StatusCode, Message: eb.Error, Details: eb.Details}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return raw, nil
}

// unwrapURLError drops the "Get "url": " prefix the message already implies.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// RunRequest is the body of POST /api/v1/executions.
type RunRequest struct {
	ActionRef  string         `json:"action_ref"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Timeout    *float64       `json:"timeout,omitempty"` // seconds
}

// RequestExecution requests a run of an action.
func (c *Client) RequestExecution(ctx context.Context, r RunRequest) (store.Execution, json.RawMessage, error) {
	var e store.Execution
	raw, err := c.Do(ctx, http.MethodPost, "/api/v1/executions", r, &e)
	return e, raw, err
}

// GetExecution fetches one execution with its timeline.
func (c *Client) GetExecution(ctx context.Context, id int64) (store.Execution, json.RawMessage, error) {
	var e store.Execution
	raw, err := c.Do(ctx, http.MethodGet, "/api/v1/executions/"+strconv.FormatInt(id, 10), nil, &e)
	return e, raw, err
}

// CancelExecution cancels one execution.
func (c *Client) CancelExecution(ctx context.Context, id int64) (store.Execution, json.RawMessage, error) {
	var e store.Execution
	raw, err := c.Do(ctx, http.MethodPost, "/api/v1/executions/"+strconv.FormatInt(id, 10)+"/cancel", nil, &e)
	return e, raw, err
}

// ExecutionQuery filters ListExecutions.
type ExecutionQuery struct {
	Statuses  []string
	ActionRef string
	Limit     int
	Before    int64 // cursor from a previous page
}

// ExecutionPage is one page of executions, newest first.
type ExecutionPage struct {
	Items []store.Execution `json:"items"`
	Next  *int64            `json:"next"` // pass as Before for the next page; nil on the last
}

// ListExecutions lists executions, newest first.
func (c *Client) ListExecutions(ctx context.Context, q ExecutionQuery) (ExecutionPage, json.RawMessage, error) {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if q.ActionRef != "" {
		v.Set("action_ref", q.ActionRef)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatInt(q.Before, 10))
	}
	path := "/api/v1/executions"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var page ExecutionPage
	raw, err := c.Do(ctx, http.MethodGet, path, nil, &page)
	return page, raw, err
}

// WaitExecution polls an execution until it reaches a final status,
// calling onChange (when not nil) each time its status or queue position
// changes. Brief network errors (an appliance restarting) are retried for
// up to retryFor.
func (c *Client) WaitExecution(ctx context.Context, id int64, retryFor time.Duration, onChange func(store.Execution)) (store.Execution, json.RawMessage, error) {
	interval := 50 * time.Millisecond
	var last string
	var failingSince time.Time
	for {
		e, raw, err := c.GetExecution(ctx, id)
		var apiErr *APIError
		switch {
		case err == nil:
			failingSince = time.Time{}
			key := e.Status
			if e.QueuePosition != nil {
				key += "@" + strconv.FormatInt(*e.QueuePosition, 10)
			}
			if key != last && onChange != nil {
				onChange(e)
			}
			last = key
			if store.IsFinal(e.Status) {
				return e, raw, nil
			}
		case errors.As(err, &apiErr) && apiErr.Status < 500, ctx.Err() != nil:
			return e, raw, err
		default:
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > retryFor {
				return e, raw, err
			}
		}
		select {
		case <-ctx.Done():
			return store.Execution{}, nil, ctx.Err()
		case <-time.After(interval):
		}
		interval = min(interval*2, time.Second)
	}
}
