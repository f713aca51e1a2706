// Package runtime runs a single action execution and reports its outcome.
//
// It is deliberately free of any database or broker dependency: the worker
// engine decides what to run and what to do with the result; this package only
// knows how to execute a built-in Go function or a script in a child process,
// bound it in time and output size, and interrupt it. Keeping it pure makes the
// hard parts (process trees, signals, capture) testable with real processes.
package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// Runtime names, as stored on actions and advertised by workers. The worker
// engine matches an action's runtime against Detect() before accepting work.
const (
	// Builtin runs a Go function inside the worker process (the core pack).
	Builtin = "builtin"
	// Shell runs a script with /bin/sh.
	Shell = "shell"
	// Python runs a script with python3 from PATH.
	Python = "python"
	// Node runs a script with node from PATH.
	Node = "node"
)

// Outcome statuses. They are the terminal execution states a runtime can
// produce; the worker engine maps them onto the execution state machine.
const (
	// Succeeded means the action ran to completion without error.
	Succeeded = "succeeded"
	// Failed means the action ran (or could not start) and reported an error.
	Failed = "failed"
	// TimedOut means Request.Timeout (or the caller's deadline) expired first.
	TimedOut = "timeout"
	// Cancelled means the caller cancelled the context.
	Cancelled = "cancelled"
)

// Defaults applied when the corresponding Request field is zero, so that a
// caller that forgets a limit still gets a bounded execution.
const (
	// DefaultOutputLimit is the per-stream capture cap: enough for any sane
	// result, small enough that a runaway script cannot exhaust worker memory.
	DefaultOutputLimit = 1 << 20
	// DefaultKillGrace gives a script time to clean up after SIGTERM.
	DefaultKillGrace = 5 * time.Second
)

// shPath is the shell used for the shell runtime and core.local. It is a
// variable only so that Detect can be reasoned about in one place.
var shPath = "/bin/sh"

// Detect returns the runtimes usable on this machine, sorted, so a worker can
// advertise only what it can actually execute: builtin always, shell if /bin/sh
// exists, python if python3 is on PATH, node if node is on PATH.
func Detect() []string {
	found := []string{Builtin}
	if fi, err := os.Stat(shPath); err == nil && !fi.IsDir() {
		found = append(found, Shell)
	}
	for rt, bin := range interpreters {
		if rt == Shell {
			continue
		}
		if _, err := exec.LookPath(bin); err == nil {
			found = append(found, rt)
		}
	}
	slices.Sort(found)
	return found
}

// interpreters maps each script runtime to the program that runs its scripts.
var interpreters = map[string]string{
	Shell:  shPath,
	Python: "python3",
	Node:   "node",
}

// Request describes one run. Zero values of the limits select safe defaults
// rather than "unlimited", except Timeout where 0 means none (the action's
// policy decides whether it has one).
type Request struct {
	// ExecutionID is passed to scripts as ATTUNE_EXECUTION_ID.
	ExecutionID int64
	// ActionRef, e.g. "core.echo", is passed to scripts as ATTUNE_ACTION.
	ActionRef string
	// Runtime is one of Builtin, Shell, Python, Node.
	Runtime string
	// Entrypoint is the builtin's name ("echo" or "core.echo"; ActionRef is
	// used when empty) or the path of the script file (relative paths are
	// resolved against WorkDir).
	Entrypoint string
	// WorkDir is the pack directory and the scripts' working directory;
	// "" means a fresh temporary directory, removed afterwards.
	WorkDir string
	// Parameters are the execution's input.
	Parameters map[string]any
	// Timeout bounds the whole run; 0 means none.
	Timeout time.Duration
	// OutputLimit caps each captured stream in bytes; 0 means 1 MiB.
	OutputLimit int
	// KillGrace is the delay between SIGTERM and SIGKILL when a process is
	// interrupted; 0 means 5s.
	KillGrace time.Duration
}

// Outcome is the result of one run. It is always fully formed: failures to
// start, bad parameters and panics in builtins become Failed outcomes rather
// than Go errors, because for the platform they are all just failed executions.
type Outcome struct {
	// Status is one of Succeeded, Failed, TimedOut, Cancelled.
	Status string
	// Result is stdout as JSON if it is valid JSON, else a JSON string of the
	// trimmed stdout; builtins return their own JSON. Nil when there is none.
	// It is kept on failure too, since partial output helps diagnosis.
	Result json.RawMessage
	// Error is the human-readable reason when Status is not Succeeded.
	Error string
	// Stdout and Stderr are the captured streams (at most OutputLimit each).
	Stdout, Stderr string
	// StdoutTruncated and StderrTruncated report that output was dropped.
	StdoutTruncated, StderrTruncated bool
	// ExitCode is the process exit code; nil for in-process builtins and for
	// processes that died from a signal.
	ExitCode *int
	// Duration is the wall time of the run.
	Duration time.Duration
}

// Runner runs executions. Cancel a run by cancelling its context: processes
// get SIGTERM on their whole process group, then SIGKILL after KillGrace, and
// the outcome is Cancelled. A Timeout does the same and yields TimedOut.
// A Runner is safe for concurrent use; the zero value is usable.
type Runner struct {
	// client serves core.http_request; one client per Runner so connections
	// are pooled across executions.
	client *http.Client
}

// NewRunner returns a Runner with its own HTTP connection pool.
func NewRunner() *Runner {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Runner{client: &http.Client{Transport: tr}}
}

// errTimeout is the cancellation cause of Request.Timeout, so that an expired
// timeout can be told apart from a caller's cancellation.
var errTimeout = errors.New("execution timeout")

// Run executes req and returns its outcome. It blocks until the run and, for
// processes, everything in their process group, have finished.
func (r *Runner) Run(ctx context.Context, req Request) Outcome {
	start := time.Now()
	if req.OutputLimit <= 0 {
		req.OutputLimit = DefaultOutputLimit
	}
	if req.KillGrace <= 0 {
		req.KillGrace = DefaultKillGrace
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, req.Timeout, errTimeout)
		defer cancel()
	}

	var out Outcome
	switch {
	case runCtx.Err() != nil:
		out = interrupted(runCtx, req)
	case req.Runtime == Builtin:
		out = r.runBuiltin(runCtx, req)
	case interpreters[req.Runtime] != "":
		out = runScript(runCtx, req)
	default:
		out = failed(fmt.Sprintf("unknown runtime %q", req.Runtime))
	}
	out.Duration = time.Since(start)
	return out
}

// runScript runs a script file with its runtime's interpreter.
func runScript(ctx context.Context, req Request) Outcome {
	interp, err := exec.LookPath(interpreters[req.Runtime])
	if err != nil {
		return failed(fmt.Sprintf("%s runtime unavailable: %s not found", req.Runtime, interpreters[req.Runtime]))
	}
	path := req.Entrypoint
	if path == "" {
		return failed("no script entrypoint given")
	}
	if !filepath.IsAbs(path) && req.WorkDir != "" {
		path = filepath.Join(req.WorkDir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return failed(fmt.Sprintf("script not found: %s", path))
	}
	if fi.IsDir() {
		return failed(fmt.Sprintf("script is a directory: %s", path))
	}
	return runCommand(ctx, req, []string{interp, path})
}

// interrupted builds the outcome of a run stopped by its context, telling the
// runner's own timeout from a caller's deadline or cancellation.
func interrupted(ctx context.Context, req Request) Outcome {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTimeout):
		return Outcome{Status: TimedOut, Error: fmt.Sprintf("timed out after %s", req.Timeout)}
	case errors.Is(cause, context.DeadlineExceeded):
		return Outcome{Status: TimedOut, Error: "timed out: deadline exceeded"}
	case cause == nil || errors.Is(cause, context.Canceled):
		return Outcome{Status: Cancelled, Error: "cancelled"}
	default:
		// A caller that cancels with a cause (e.g. "cancelled by user") gets
		// that reason shown to the user.
		return Outcome{Status: Cancelled, Error: "cancelled: " + cause.Error()}
	}
}

// failed is a Failed outcome with the given reason.
func failed(msg string) Outcome {
	return Outcome{Status: Failed, Error: msg}
}

// resultFromStdout turns captured stdout into a result: JSON as-is (compacted),
// anything else as a JSON string of the trimmed text, nil when empty.
func resultFromStdout(stdout []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return nil
	}
	if json.Valid(trimmed) {
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			return buf.Bytes()
		}
	}
	b, _ := json.Marshal(string(trimmed)) // a string always marshals
	return b
}
