package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

func TestRuntimesEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	c.action(store.Action{Ref: "t.sh", Name: "sh", Runtime: "shell", Entrypoint: c.script("a.sh",
		`read p; echo "warn" >&2; echo "{\"got\": $p, \"id\": \"$ATTUNE_EXECUTION_ID\"}"`)})
	c.action(store.Action{Ref: "t.py", Name: "py", Runtime: "python", Entrypoint: c.script("a.py",
		"import json,sys\np=json.load(sys.stdin)\nprint(json.dumps({'double': p['n']*2}))\n")})
	c.action(store.Action{Ref: "t.js", Name: "js", Runtime: "node", Entrypoint: c.script("a.js",
		"let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const p=JSON.parse(s);console.log(JSON.stringify({upper:p.w.toUpperCase()}))})\n")})
	c.action(store.Action{Ref: "t.fail", Name: "fail", Runtime: "shell", Entrypoint: c.script("f.sh", "echo broken >&2; exit 3\n")})

	echo := c.wait(c.run("core.echo", map[string]any{"message": "hi"}).ID, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, echo.Status)
	assert.Equal(t, "hi", resultOf(t, echo)["message"])

	sh := c.wait(c.run("t.sh", map[string]any{"x": 1}).ID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, sh.Status, deref(sh.Error))
	assert.Equal(t, map[string]any{"x": float64(1)}, resultOf(t, sh)["got"])
	assert.Equal(t, "warn\n", deref(sh.Stderr))
	require.NotNil(t, sh.ExitCode)
	assert.Equal(t, 0, *sh.ExitCode)

	py := c.wait(c.run("t.py", map[string]any{"n": 21}).ID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, py.Status, deref(py.Error))
	assert.Equal(t, float64(42), resultOf(t, py)["double"])

	js := c.wait(c.run("t.js", map[string]any{"w": "abc"}).ID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, js.Status, deref(js.Error))
	assert.Equal(t, "ABC", resultOf(t, js)["upper"])

	fail := c.wait(c.run("t.fail", nil).ID, 20*time.Second)
	assert.Equal(t, store.StatusFailed, fail.Status)
	require.NotNil(t, fail.ExitCode)
	assert.Equal(t, 3, *fail.ExitCode)
	assert.Contains(t, deref(fail.Error), "exit code 3")
	assert.Equal(t, "broken\n", deref(fail.Stderr))

	full, err := c.st.GetExecution(context.Background(), echo.ID)
	require.NoError(t, err)
	var steps []string
	for _, tr := range full.Timeline {
		steps = append(steps, tr.To)
	}
	assert.Equal(t, []string{"requested", "scheduling", "scheduled", "running", "succeeded"}, steps)
}

func TestCancelQueuedAndRunningAndTimeout(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	one := 1
	c.action(store.Action{Ref: "t.slow", Name: "slow", Runtime: "builtin", Entrypoint: "sleep",
		Policy: store.Policy{Concurrency: store.Concurrency{Limit: &one}}})

	running := c.run("t.slow", map[string]any{"seconds": 30})
	queued := c.run("t.slow", map[string]any{"seconds": 30})
	c.waitFor(running.ID, 20*time.Second, func(s string) bool { return s == store.StatusRunning })
	c.waitFor(queued.ID, 20*time.Second, func(s string) bool { return s == store.StatusQueued })

	e, err := c.svc.CancelExecution(context.Background(), queued.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusCancelled, e.Status, "a queued execution is cancelled at once")

	e, err = c.svc.CancelExecution(context.Background(), running.ID)
	require.NoError(t, err)
	assert.Contains(t, []string{store.StatusCanceling, store.StatusCancelled}, e.Status)
	e = c.wait(running.ID, 10*time.Second)
	assert.Equal(t, store.StatusCancelled, e.Status)

	timeout := 0.3
	to, err := c.svc.RequestExecution(context.Background(), runReq("core.sleep", map[string]any{"seconds": 10}, &timeout))
	require.NoError(t, err)
	e = c.wait(to.ID, 20*time.Second)
	assert.Equal(t, store.StatusTimeout, e.Status)
}
