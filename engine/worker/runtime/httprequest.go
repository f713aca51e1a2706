package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// defaultHTTPTimeout applies when core.http_request gets no "timeout".
const defaultHTTPTimeout = 30 * time.Second

// httpMethods are the methods the schema offers; accepted case-insensitively.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// httpResult is the JSON result of core.http_request. A struct, not a map, so
// the field order is stable for people reading results.
type httpResult struct {
	StatusCode int               `json:"status_code"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	// JSON is the parsed body when it is valid (and complete) JSON, so rules
	// and workflows can address fields without parsing a string.
	JSON          json.RawMessage `json:"json,omitempty"`
	BodyTruncated bool            `json:"body_truncated,omitempty"`
}

// runHTTPRequest performs the request. Any response, including 4xx and 5xx,
// is a success carrying its status code: whether a 404 is an error depends on
// the workflow (probing for absence is legitimate), so the caller decides.
// Only transport failures (DNS, connect, TLS, timeout) fail the execution.
func runHTTPRequest(ctx context.Context, r *Runner, req Request) (json.RawMessage, error) {
	hreq, timeout, err := buildHTTPRequest(req.Parameters)
	if err != nil {
		return nil, err
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq = hreq.WithContext(reqCtx)

	client := http.DefaultClient
	if r != nil && r.client != nil {
		client = r.client
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, httpError(ctx, reqCtx, timeout, err)
	}
	defer resp.Body.Close()

	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading response body: %w", httpError(ctx, reqCtx, timeout, err))
	}
	res := httpResult{StatusCode: resp.StatusCode, Headers: map[string]string{}}
	if len(body) > limit {
		body = body[:limit]
		res.BodyTruncated = true
	}
	res.Body = string(body)
	if trimmed := bytes.TrimSpace(body); !res.BodyTruncated && len(trimmed) > 0 && json.Valid(trimmed) {
		res.JSON = json.RawMessage(trimmed)
	}
	for k, vs := range resp.Header {
		// One string per header keeps results easy to use; ", " is the
		// standard way to combine repeated fields (RFC 9110 §5.3).
		res.Headers[k] = strings.Join(vs, ", ")
	}
	return json.Marshal(res)
}

// buildHTTPRequest validates the parameters and builds the request (without
// context) and its timeout.
func buildHTTPRequest(params map[string]any) (*http.Request, time.Duration, error) {
	rawURL, err := stringParam(params, "url", true)
	if err != nil {
		return nil, 0, err
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, 0, fmt.Errorf(`parameter "url" must be an absolute http or https URL, got %q`, rawURL)
	}
	method, err := stringParam(params, "method", false)
	if err != nil {
		return nil, 0, err
	}
	method = strings.ToUpper(method)
	if method == "" {
		method = http.MethodGet
	}
	if !slices.Contains(httpMethods, method) {
		return nil, 0, fmt.Errorf(`parameter "method" must be one of %s, got %q`, strings.Join(httpMethods, ", "), method)
	}
	body, err := stringParam(params, "body", false)
	if err != nil {
		return nil, 0, err
	}
	secs, present, err := numberParam(params, "timeout", false)
	if err != nil {
		return nil, 0, err
	}
	timeout := defaultHTTPTimeout
	if present {
		if secs <= 0 || secs > float64(24*time.Hour/time.Second) {
			return nil, 0, errors.New(`parameter "timeout" must be greater than 0 and at most 86400 seconds`)
		}
		timeout = time.Duration(secs * float64(time.Second))
	}

	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	hreq, err := http.NewRequest(method, u.String(), rd)
	if err != nil {
		return nil, 0, fmt.Errorf("building request: %w", err)
	}
	headers, err := headersParam(params)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			hreq.Host = v // net/http ignores a Host entry in Header
			continue
		}
		hreq.Header.Set(k, v)
	}
	return hreq, timeout, nil
}

// headersParam reads "headers" as an object of strings.
func headersParam(params map[string]any) (map[string]string, error) {
	switch h := params["headers"].(type) {
	case nil:
		return nil, nil
	case map[string]string:
		return h, nil
	case map[string]any:
		out := make(map[string]string, len(h))
		for k, v := range h {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("header %q must be a string, got %T", k, v)
			}
			out[k] = s
		}
		return out, nil
	default:
		return nil, fmt.Errorf(`parameter "headers" must be an object of strings, got %T`, h)
	}
}

// httpError explains a transport error. When the execution's own context is
// done the raw error is returned so runBuiltin reports TimedOut/Cancelled;
// the request's own timeout is a plain failure of the request.
func httpError(execCtx, reqCtx context.Context, timeout time.Duration, err error) error {
	if execCtx.Err() != nil {
		return err
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("request timed out after %s", timeout)
	}
	return fmt.Errorf("request failed: %w", err)
}
