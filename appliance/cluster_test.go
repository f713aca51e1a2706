package appliance_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Cluster mode with real processes (issue 5, scenarios 1 and 4): a
// worker-only appliance joins a single-node one through its cluster.env,
// is killed with SIGKILL mid-execution, comes back with the same worker id,
// and is stopped with SIGTERM while it runs an execution.

// fastHeartbeats are the short timers of these tests: heartbeats every
// 0.5 s (a worker is dead after 1.5 s without one), recovery loops as often.
var fastHeartbeats = []string{
	"ATTUNE__WORKER__HEARTBEAT_INTERVAL_SECONDS=0.5",
	"ATTUNE__EXECUTOR__REDRIVE_AFTER_SECONDS=1",
	"ATTUNE__WORKER__SHUTDOWN_TIMEOUT_SECONDS=10",
}

// startWith starts `attune serve` with extra environment variables.
func startWith(t *testing.T, dataDir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, addr: freeAddr(t), dataDir: dataDir, out: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(binary, append([]string{"serve", "--data-dir", dataDir, "--http-addr", p.addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(append(os.Environ(), fastHeartbeats...), env...)
	require.NoError(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// clusterEnv reads <dir>/cluster.env, checking its mode and keys.
func clusterEnv(t *testing.T, dir string) []string {
	t.Helper()
	path := filepath.Join(dir, "cluster.env")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	env := strings.Fields(string(b))
	require.Len(t, env, 2, "%s", b)
	assert.True(t, strings.HasPrefix(env[0], "ATTUNE__DATABASE__URL=postgres"), env[0])
	assert.True(t, strings.HasPrefix(env[1], "ATTUNE__BROKER__URL=amqp://"), env[1])
	return env
}

func workerID(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "worker.id"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// workers returns the workers the API lists, by id.
func (p *proc) workers() map[string]map[string]any {
	p.t.Helper()
	code, body := p.api("GET", "/api/v1/workers", nil)
	require.Equal(p.t, 200, code, "%v", body)
	out := map[string]map[string]any{}
	for _, it := range body["items"].([]any) {
		w := it.(map[string]any)
		out[w["id"].(string)] = w
	}
	return out
}

func (p *proc) workerStatus(id string) string {
	s, _ := p.workers()[id]["status"].(string)
	return s
}

func (p *proc) setWorker(id, op, want string) {
	p.t.Helper()
	code, body := p.api("POST", "/api/v1/workers/"+id+"/"+op, nil)
	require.Equal(p.t, 200, code, "%v", body)
	require.Equal(p.t, want, body["status"])
}

func (p *proc) request(action string, params map[string]any) int64 {
	p.t.Helper()
	code, e := p.api("POST", "/api/v1/executions", map[string]any{"action_ref": action, "parameters": params})
	require.Equal(p.t, 201, code, "%v", e)
	return int64(e["id"].(float64))
}

func (p *proc) execution(id int64) map[string]any {
	p.t.Helper()
	code, e := p.api("GET", fmt.Sprintf("/api/v1/executions/%d", id), nil)
	require.Equal(p.t, 200, code, "%v", e)
	return e
}

// waitStatus waits until the execution has one of the statuses.
func (p *proc) waitStatus(id int64, within time.Duration, statuses ...string) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		e := p.execution(id)
		for _, s := range statuses {
			if e["status"] == s {
				return e
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("execution %d is %v (%v), want %v after %s", id, e["status"], e["status_reason"], statuses, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// workerCacheAge: executors may pick a worker this long after it stopped
// being eligible.
const workerCacheAge = 1200 * time.Millisecond

func TestWorkerOnlyApplianceDiesRestartsAndStopsGracefully(t *testing.T) {
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := startWith(t, dirA, nil)
	a.waitReady()
	env := clusterEnv(t, dirA)
	wa := workerID(t, dirA)

	// A worker-only appliance joins; it starts no services of its own.
	b := startWith(t, dirB, env, "--roles", "worker")
	b.waitReady()
	wb := workerID(t, dirB)
	require.NotEqual(t, wa, wb)
	for _, sub := range []string{"postgres", "rabbitmq", "cluster.env"} {
		assert.NoFileExists(t, filepath.Join(dirB, sub))
	}
	code, body := b.api("GET", "/api/v1/workers", nil)
	assert.Equal(t, 503, code, "no api role: %v", body)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, _ := get(t, b.url(path))
		assert.Equal(t, 200, code, path)
	}
	require.Eventually(t, func() bool { return a.workerStatus(wb) == "active" }, 10*time.Second, 50*time.Millisecond)
	w := a.workers()[wb]
	assert.Contains(t, w["runtimes"], "builtin")
	assert.EqualValues(t, 32, w["capacity"])
	assert.Less(t, w["heartbeat_age_seconds"].(float64), 1.5)

	// Scenario 1: limit 1; the first execution runs on B, the next waits.
	code, body = a.api("PUT", "/api/v1/actions/core.sleep/policy", map[string]any{"concurrency": map[string]any{"limit": 1}})
	require.Equal(t, 200, code, "%v", body)
	a.setWorker(wa, "cordon", "cordoned")
	time.Sleep(workerCacheAge)
	first := a.request("core.sleep", map[string]any{"seconds": 60})
	next := a.request("core.sleep", map[string]any{"seconds": 0})
	e := a.waitStatus(first, 10*time.Second, "running")
	require.Equal(t, wb, e["worker"])
	a.waitStatus(next, 5*time.Second, "queued")
	a.setWorker(wa, "uncordon", "active")

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	<-b.exited
	killed := time.Now()
	e = a.waitStatus(first, 10*time.Second, "abandoned", "succeeded", "failed")
	assert.Equal(t, "abandoned", e["status"])
	assert.Contains(t, e["status_reason"], "lost")
	assert.Less(t, time.Since(killed), 4*time.Second, "abandoned about 3 heartbeats (1.5 s) after the kill")
	e = a.waitStatus(next, 10*time.Second, "succeeded", "failed", "abandoned")
	assert.Equal(t, "succeeded", e["status"], "the slot was freed and the next one ran")
	assert.Equal(t, wa, e["worker"])
	assert.Equal(t, "inactive", a.workerStatus(wb))

	// B comes back with the same worker id; drain and uncordon it via the API.
	b = startWith(t, dirB, env, "--roles", "worker")
	b.waitReady()
	assert.Equal(t, wb, workerID(t, dirB))
	require.Eventually(t, func() bool { return a.workerStatus(wb) == "active" }, 10*time.Second, 50*time.Millisecond)
	a.setWorker(wb, "drain", "draining")
	require.Eventually(t, func() bool { return a.workerStatus(wb) == "drained" }, 5*time.Second, 50*time.Millisecond,
		"nothing in flight: drained within a heartbeat")
	a.setWorker(wb, "uncordon", "active")

	// Scenario 4: SIGTERM while B runs an execution.
	a.setWorker(wa, "cordon", "cordoned")
	time.Sleep(workerCacheAge)
	inflight := a.request("core.sleep", map[string]any{"seconds": 3})
	e = a.waitStatus(inflight, 10*time.Second, "running")
	require.Equal(t, wb, e["worker"])
	a.setWorker(wa, "uncordon", "active")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return a.workerStatus(wb) == "draining" }, 5*time.Second, 20*time.Millisecond)
	time.Sleep(workerCacheAge)
	for range 3 {
		id := a.request("core.noop", nil)
		e := a.waitStatus(id, 10*time.Second, "succeeded", "failed")
		assert.Equal(t, wa, e["worker"], "a stopping worker gets no new work")
	}
	e = a.waitStatus(inflight, 10*time.Second, "succeeded", "failed", "cancelled", "abandoned")
	assert.Equal(t, "succeeded", e["status"], "in-flight work finishes: %v", e["status_reason"])
	select {
	case err := <-b.exited:
		require.NoError(t, err, "exit status after SIGTERM\n%s", b.out)
	case <-time.After(20 * time.Second):
		t.Fatalf("worker did not stop after SIGTERM\n%s", b.out)
	}
	assert.Equal(t, "inactive", a.workerStatus(wb))
	assert.Empty(t, leftovers(dirB))

	// A's metrics saw all of it.
	code, metrics := get(t, a.url("/metrics"))
	require.Equal(t, 200, code)
	for _, want := range []string{
		`attune_executions{status="running"} 0`, `attune_executions_finished_total{status="abandoned"}`,
		`attune_queue_length{action="core.sleep"} 0`, `attune_dlq_depth `, `attune_workers{status="inactive"} 1`,
		`attune_worker_heartbeat_age_seconds{status="active",worker="` + wa + `"}`,
		`attune_execution_dispatch_latency_seconds_count{action="core.sleep"}`,
		`attune_execution_run_duration_seconds_count{action="core.sleep",status="succeeded"}`,
		`attune_metrics_database_up 1`,
	} {
		assert.Contains(t, metrics, want)
	}
	a.stop()
	assert.Empty(t, leftovers(dirA))
}

func TestEveryRoleSubsetJoins(t *testing.T) {
	dirA := filepath.Join(t.TempDir(), "a")
	a := startWith(t, dirA, nil, "--roles", "api,executor")
	a.waitReady()
	assert.NoFileExists(t, filepath.Join(dirA, "worker.id"), "no worker role, no worker")
	env := clusterEnv(t, dirA)
	roles := map[string]int{"api": 200, "executor": 503, "worker": 503, "api,worker": 200, "executor,worker": 503}
	procs := map[string]*proc{}
	for r := range roles {
		procs[r] = startWith(t, filepath.Join(t.TempDir(), strings.ReplaceAll(r, ",", "-")), env, "--roles", r)
	}
	for r, want := range roles {
		p := procs[r]
		p.waitReady()
		code, body := p.api("GET", "/api/v1/workers", nil)
		assert.Equal(t, want, code, "roles %s: %v", r, body)
		code, _ = get(t, p.url("/metrics"))
		assert.Equal(t, 200, code, "roles %s", r)
	}
	// The joined workers run what the api-only process accepts.
	id := procs["api"].request("core.echo", map[string]any{"message": "hi"})
	e := procs["api"].waitStatus(id, 30*time.Second, "succeeded", "failed")
	assert.Equal(t, "succeeded", e["status"])
	for _, p := range procs {
		p.stop()
	}
	a.stop()
	assert.Empty(t, leftovers(dirA))
}
