package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure one benchmark run against a running appliance.
type Options struct {
	Executions  int           // how many to request
	Concurrency int           // the bench action's concurrency limit (per group)
	Groups      int           // distinct group_by values
	Action      string        // the action whose runtime/entrypoint the bench copies; default core.noop
	Clients     int           // concurrent HTTP requesters; default 16
	Timeout     time.Duration // how long to wait for every execution to finish; default 10m
	Progress    io.Writer     // progress lines; nil = quiet
}

func (o *Options) defaults() error {
	if o.Executions <= 0 || o.Concurrency <= 0 || o.Groups <= 0 {
		return fmt.Errorf("--executions, --concurrency and --groups must be positive")
	}
	if o.Action == "" {
		o.Action = "core.noop"
	}
	if o.Clients <= 0 {
		o.Clients = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Run registers a fresh bench action (a copy of o.Action with the bench's
// policy: limit = Concurrency per group, group_by = bench_group), requests
// Executions of it, waits until all are finished and analyzes them.
func Run(ctx context.Context, api API, o Options) (Report, error) {
	if err := o.defaults(); err != nil {
		return Report{}, err
	}
	c := &client{api: api}
	ref, err := c.registerBenchAction(ctx, o)
	if err != nil {
		return Report{}, err
	}
	fmt.Fprintf(o.Progress, "bench: requesting %d executions of %s (limit %d, %d groups)\n", o.Executions, ref, o.Concurrency, o.Groups)
	postStart := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Clients)
	for range o.Clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(o.Executions) || ctx.Err() != nil {
					return
				}
				body := map[string]any{"action_ref": ref, "parameters": map[string]any{"bench_group": fmt.Sprintf("g%d", i%int64(o.Groups))}}
				if err := c.do(ctx, "POST", "/executions", body, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Report{}, fmt.Errorf("request executions: %w", err)
	}
	fmt.Fprintf(o.Progress, "bench: requested all in %.2fs; waiting for them to finish\n", time.Since(postStart).Seconds())
	deadline := time.Now().Add(o.Timeout)
	for time.Now().Before(deadline) {
		var page struct {
			Items []Execution `json:"items"`
		}
		q := "/executions?limit=1&action_ref=" + ref + "&status=requested,scheduling,queued,scheduled,running,canceling"
		if err := c.do(ctx, "GET", q, nil, &page); err != nil {
			return Report{}, err
		}
		if len(page.Items) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	execs, err := c.all(ctx, ref)
	if err != nil {
		return Report{}, err
	}
	return Analyze(execs, o.Concurrency, o.Groups, o.Action), nil
}

// API is the part of the appliance's HTTP client the bench uses
// (appliance.Client satisfies it); paths start with /api/v1.
type API interface {
	Do(ctx context.Context, method, path string, body, out any) (json.RawMessage, error)
}

type client struct{ api API }

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.api.Do(ctx, method, "/api/v1"+path, body, out)
	return err
}

// registerBenchAction copies the base action under a fresh ref with an
// accept-anything parameter schema (so bench_group is allowed) and the
// bench's policy.
func (c *client) registerBenchAction(ctx context.Context, o Options) (string, error) {
	var base struct {
		Runtime    string `json:"runtime"`
		Entrypoint string `json:"entrypoint"`
	}
	if err := c.do(ctx, "GET", "/actions/"+o.Action, nil, &base); err != nil {
		return "", fmt.Errorf("base action %s: %w", o.Action, err)
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ref := fmt.Sprintf("bench.%s_c%d_g%d_%s", strings.ReplaceAll(o.Action, ".", "_"), o.Concurrency, o.Groups, hex.EncodeToString(suffix))
	spec := map[string]any{
		"ref": ref, "description": "benchmark copy of " + o.Action, "runtime": base.Runtime, "entrypoint": base.Entrypoint,
		"parameters": map[string]any{"type": "object"},
		"policy": map[string]any{
			"concurrency":      map[string]any{"limit": o.Concurrency, "group_by": []string{"bench_group"}},
			"max_queue_length": o.Executions + 1,
		},
	}
	if err := c.do(ctx, "POST", "/actions", spec, nil); err != nil {
		return "", fmt.Errorf("register bench action: %w", err)
	}
	return ref, nil
}

// all lists every execution of ref (keyset pages of 1000).
func (c *client) all(ctx context.Context, ref string) ([]Execution, error) {
	var out []Execution
	before := int64(0)
	for {
		var page struct {
			Items []Execution `json:"items"`
			Next  *int64      `json:"next"`
		}
		q := fmt.Sprintf("/executions?limit=1000&action_ref=%s", ref)
		if before > 0 {
			q += fmt.Sprintf("&before=%d", before)
		}
		if err := c.do(ctx, "GET", q, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Next == nil || *page.Next == 0 {
			return out, nil
		}
		before = *page.Next
	}
}
