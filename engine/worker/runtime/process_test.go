package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// processGone reports whether pid no longer runs. A zombie counts as gone: it
// has been killed and only waits for its (new) parent to reap it, which in a
// container may be a PID 1 that never does.
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// Format: pid (comm) state ...; comm may contain spaces, so split after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// pidFromStdout parses the first line of a script's stdout as a pid.
func pidFromStdout(t *testing.T, stdout string) int {
	t.Helper()
	line, _, _ := strings.Cut(stdout, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "stdout %q", stdout)
	return pid
}

func requireGone(t *testing.T, pid int) {
	t.Helper()
	// Delivery of SIGKILL is asynchronous; death follows within milliseconds.
	assert.Eventually(t, func() bool { return processGone(pid) }, 2*time.Second, 10*time.Millisecond,
		"process %d still alive", pid)
}

func TestOutputCapKeepsDraining(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 300 KB on each stream: far beyond the pipe buffer, so the script would
	// block forever if we stopped reading at the cap.
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir, OutputLimit: 1000,
		Timeout: 10 * time.Second,
		Entrypoint: writeScript(t, dir, "big.sh",
			"head -c 300000 /dev/zero | tr '\\0' a\nhead -c 300000 /dev/zero | tr '\\0' b >&2\necho done >&2\n")})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.Equal(t, strings.Repeat("a", 1000), out.Stdout)
	assert.Equal(t, strings.Repeat("b", 1000), out.Stderr)
	assert.True(t, out.StdoutTruncated)
	assert.True(t, out.StderrTruncated)
	assert.Equal(t, `"`+strings.Repeat("a", 1000)+`"`, string(out.Result))
}

// TestLargeParameters: a 1 MiB parameter the script never reads must not
// block the run on a full stdin pipe, nor break exec via the environment.
func TestLargeParameters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir, Timeout: 10 * time.Second,
		Parameters: map[string]any{"blob": strings.Repeat("x", 1<<20), "nul": "a\x00b", "small": "s"},
		Entrypoint: writeScript(t, dir, "s.sh", "echo \"${ATTUNE_PARAM_BLOB-noblob} ${ATTUNE_PARAM_NUL-nonul} $ATTUNE_PARAM_SMALL\"\n")})
	assert.Equal(t, Succeeded, out.Status, out.Error)
	// Values that cannot go in the environment are only on stdin.
	assert.Equal(t, `"noblob nonul s"`, string(out.Result))
}

// TestTimeoutKillsProcessTree checks that the grandchild is killed too, which
// only works because the script runs in its own process group.
func TestTimeoutKillsProcessTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir,
		Timeout: 300 * time.Millisecond, KillGrace: 500 * time.Millisecond,
		Entrypoint: writeScript(t, dir, "tree.sh", "sleep 30 &\necho $!\nwait\n")})
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, TimedOut, out.Status)
	assert.Equal(t, "timed out after 300ms", out.Error)
	assert.Nil(t, out.ExitCode, "killed by SIGTERM, no exit code")
	requireGone(t, pidFromStdout(t, out.Stdout))
}

// TestCancelEscalatesToSIGKILL: the script and its child ignore SIGTERM, so
// only the SIGKILL after KillGrace can stop them.
func TestCancelEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Outcome, 1)
	go func() {
		done <- NewRunner().Run(ctx, Request{Runtime: Shell, WorkDir: dir, KillGrace: 400 * time.Millisecond,
			Entrypoint: writeScript(t, dir, "stubborn.sh",
				"trap '' TERM\nsleep 30 &\necho $!\necho $! > ready.tmp && mv ready.tmp ready\nwait\n")})
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil }, 5*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(ready)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)

	cancelled := time.Now()
	cancel()
	var out Outcome
	select {
	case out = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	elapsed := time.Since(cancelled)
	assert.GreaterOrEqual(t, elapsed, 400*time.Millisecond, "SIGTERM was ignored, so it must have waited the grace")
	assert.Less(t, elapsed, 2*time.Second)
	assert.Equal(t, Cancelled, out.Status)
	assert.Equal(t, "cancelled", out.Error)
	assert.Nil(t, out.ExitCode)
	requireGone(t, child)
}

func TestCancelWithCauseAndBeforeStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := writeScript(t, dir, "s.sh", "touch ran\n")

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("cancelled by user alice"))
	out := NewRunner().Run(ctx, Request{Runtime: Shell, WorkDir: dir, Entrypoint: script})
	assert.Equal(t, Cancelled, out.Status)
	assert.Equal(t, "cancelled: cancelled by user alice", out.Error)
	assert.NoFileExists(t, filepath.Join(dir, "ran"), "a cancelled run never starts")

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	out = NewRunner().Run(dctx, Request{Runtime: Shell, WorkDir: dir, Entrypoint: script})
	assert.Equal(t, TimedOut, out.Status)
}

// TestLeftoverChildIsKilled: a script that exits while a background child
// still holds stdout must neither hang the run nor leak the child.
func TestLeftoverChildIsKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir,
		Entrypoint: writeScript(t, dir, "bg.sh", "sleep 30 &\necho $!\n")})
	assert.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, Succeeded, out.Status, out.Error)
	requireGone(t, pidFromStdout(t, out.Stdout))
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir,
		Entrypoint: writeScript(t, dir, "k.sh", "kill -KILL $$\n")})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, "killed by signal 9 (killed)", out.Error)
	assert.Nil(t, out.ExitCode)
}

// TestTimeoutOnInterpreter covers the python runtime's interruption, since
// interpreters install their own signal handling.
func TestTimeoutOnInterpreter(t *testing.T) {
	t.Parallel()
	requireRuntime(t, Python)
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{Runtime: Python, WorkDir: dir,
		Timeout: 500 * time.Millisecond, KillGrace: 300 * time.Millisecond,
		Entrypoint: writeScript(t, dir, "slow.py", "import time\ntime.sleep(30)\n")})
	assert.Equal(t, TimedOut, out.Status)
	assert.Less(t, out.Duration, 3*time.Second)
}
