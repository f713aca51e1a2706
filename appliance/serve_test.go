package appliance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

var binary string

func TestMain(m *testing.M) {
	binary = os.Getenv("ATTUNE_TEST_BINARY")
	if binary == "" {
		dir, err := os.MkdirTemp("", "attune-bin-")
		if err != nil {
			panic(err)
		}
		binary = filepath.Join(dir, "attune")
		out, err := exec.Command("go", "build", "-o", binary, "./cmd/attune").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build attune: %v\n%s", err, out)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
	}
	code := m.Run()
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// proc is an `attune serve` process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	out     *bytes.Buffer
	exited  chan error
}

func startServe(t *testing.T, dataDir string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, addr: freeAddr(t), dataDir: dataDir, out: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(binary, append([]string{"serve", "--data-dir", dataDir, "--http-addr", p.addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), "ATTUNE__WORKER__SHUTDOWN_TIMEOUT_SECONDS=5")
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

func (p *proc) url(path string) string { return "http://" + p.addr + path }

func (p *proc) waitReady() {
	p.t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.exited:
			p.t.Fatalf("attune serve exited early: %v\n%s", err, p.out)
		default:
		}
		resp, err := http.Get(p.url("/readyz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.t.Fatalf("never ready:\n%s", p.out)
}

func (p *proc) stop() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(p.t, err, "exit status after SIGTERM\n%s", p.out)
	case <-time.After(30 * time.Second):
		p.t.Fatalf("did not stop within 30s after SIGTERM\n%s", p.out)
	}
}

func (p *proc) token() string {
	b, err := os.ReadFile(filepath.Join(p.dataDir, "admin.token"))
	require.NoError(p.t, err)
	return strings.TrimSpace(string(b))
}

func (p *proc) api(method, path string, body any) (int, map[string]any) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url(path), rd)
	req.Header.Set("Authorization", "Bearer "+p.token())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// leftovers lists processes whose command line or environment mentions dir.
func leftovers(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := fmt.Sscan(e.Name(), new(int)); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

func TestServeRunsSideBySideStopsCleanlyAndKeepsData(t *testing.T) {
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a, b := startServe(t, dirA), startServe(t, dirB)
	a.waitReady()
	b.waitReady()

	info, err := os.Stat(filepath.Join(dirA, "admin.token"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.Contains(t, a.out.String(), "Dashboard: http://"+a.addr)

	status, e := a.api("POST", "/api/v1/executions", map[string]any{"action_ref": "core.echo", "parameters": map[string]any{"message": "kept"}})
	require.Equal(t, 201, status, "%v", e)
	id := int64(e["id"].(float64))
	require.Eventually(t, func() bool {
		_, got := a.api("GET", fmt.Sprintf("/api/v1/executions/%d", id), nil)
		return got["status"] == "succeeded"
	}, 30*time.Second, 100*time.Millisecond)

	status, pol := a.api("PUT", "/api/v1/actions/core.sleep/policy", map[string]any{"concurrency": map[string]any{"limit": 3}})
	require.Equal(t, 200, status, "%v", pol)

	a.stop()
	b.stop()
	assert.Empty(t, leftovers(dirA), "no postgres, beam or epmd process left behind")
	assert.Empty(t, leftovers(dirB))

	again := startServe(t, dirA)
	again.waitReady()
	status, got := again.api("GET", fmt.Sprintf("/api/v1/executions/%d", id), nil)
	require.Equal(t, 200, status)
	assert.Equal(t, "succeeded", got["status"], "data survives a restart")
	assert.Equal(t, map[string]any{"message": "kept"}, got["result"])
	status, pol = again.api("GET", "/api/v1/actions/core.sleep/policy", nil)
	require.Equal(t, 200, status)
	assert.Equal(t, float64(3), pol["concurrency"].(map[string]any)["limit"], "a policy set on a built-in action survives a restart")
	again.stop()
	assert.Empty(t, leftovers(dirA))
}

func TestBadConfigIsAClearError(t *testing.T) {
	cases := map[string]struct {
		args []string
		env  []string
		want string
	}{
		"bad port":         {args: []string{"serve", "--http-addr", "127.0.0.1:70000"}, want: "http.addr"},
		"unknown key":      {args: []string{"config"}, env: []string{"ATTUNE__HTTP__PORTT=1"}, want: "portt"},
		"negative timeout": {args: []string{"config"}, env: []string{"ATTUNE__EXECUTOR__QUEUE__QUEUE_TIMEOUT_SECONDS=-1"}, want: "executor.queue.queue_timeout_seconds"},
		"missing file":     {args: []string{"serve", "--config", "/nonexistent.yaml"}, want: "/nonexistent.yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(binary, append(tc.args, "--data-dir", t.TempDir())...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s", out)
			assert.Contains(t, string(out), tc.want)
		})
	}
}

func TestConfigRedactsSecretsAndVersionPrints(t *testing.T) {
	cmd := exec.Command(binary, "config", "--data-dir", t.TempDir(), "--database-url", "postgres://u:topsecret@db/x")
	cmd.Env = append(os.Environ(), "ATTUNE__BROKER__URL=amqp://u:alsosecret@mq/")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, string(out), "topsecret")
	assert.NotContains(t, string(out), "alsosecret")
	assert.Contains(t, string(out), "postgres://u:REDACTED@db/x")
	out, err = exec.Command(binary, "version").CombinedOutput()
	require.NoError(t, err)
	assert.Regexp(t, `^attune \S+ \(commit \S+, built \S+\)`, string(out))
}
