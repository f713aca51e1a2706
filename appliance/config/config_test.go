package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "attune.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	path := writeFile(t, "http:\n  addr: 127.0.0.1:9001\nexecutor:\n  queue:\n    max_queue_length: 50\nworker:\n  capacity: 3\n")
	env := []string{"ATTUNE__HTTP__ADDR=127.0.0.1:9002", "ATTUNE__EXECUTOR__QUEUE__MAX_QUEUE_LENGTH=70", "HOME=/x"}
	cfg, err := Load(path, env, map[string]any{"http.addr": "127.0.0.1:9003", "data_dir": t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9003", cfg.HTTP.Addr, "flag beats env and file")
	assert.Equal(t, 70, cfg.Executor.Queue.MaxQueueLength, "env beats file")
	assert.Equal(t, 3, cfg.Worker.Capacity, "file beats default")
	assert.Equal(t, 3600, cfg.Executor.Queue.QueueTimeoutSeconds, "default kept")
}

func TestRolesFromEnvList(t *testing.T) {
	cfg, err := Load("", []string{"ATTUNE__ROLES=worker, executor"}, map[string]any{"data_dir": t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, []string{"worker", "executor"}, cfg.Roles)
	assert.True(t, cfg.HasRole(RoleWorker))
	assert.False(t, cfg.HasRole(RoleAPI))
}

func TestDefaultDataDirFollowsXDG(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	cfg, err := Load("", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(xdg, "attune"), cfg.DataDir)
}

func TestInvalidValuesNameTheKey(t *testing.T) {
	cases := map[string]struct {
		file string
		env  []string
		want string
	}{
		"bad port":         {file: "http:\n  addr: 127.0.0.1:99999\n", want: "http.addr"},
		"not host:port":    {env: []string{"ATTUNE__HTTP__ADDR=localhost"}, want: "http.addr"},
		"unknown key":      {file: "http:\n  adr: 127.0.0.1:8080\n", want: "adr"},
		"unknown section":  {env: []string{"ATTUNE__BOGUS__KEY=1"}, want: "bogus"},
		"negative timeout": {file: "executor:\n  queue:\n    queue_timeout_seconds: -5\n", want: "executor.queue.queue_timeout_seconds"},
		"not a number":     {env: []string{"ATTUNE__WORKER__CAPACITY=many"}, want: "capacity"},
		"bad role":         {env: []string{"ATTUNE__ROLES=api,chef"}, want: "roles"},
		"bad log format":   {file: "log:\n  format: xml\n", want: "log.format"},
		"bad database url": {env: []string{"ATTUNE__DATABASE__URL=mysql://x"}, want: "database.url"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			_, err := Load(path, tc.env, map[string]any{"data_dir": t.TempDir()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	_, err := Load("/nonexistent/attune.yaml", nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/attune.yaml")
}

func TestRedactedHidesPasswords(t *testing.T) {
	cfg := Default()
	cfg.Database.URL = "postgres://attune:s3cret@db:5432/attune"
	cfg.Broker.URL = "amqp://guest:hunter2@mq:5672/"
	r := cfg.Redacted()
	assert.Equal(t, "postgres://attune:REDACTED@db:5432/attune", r.Database.URL)
	assert.Equal(t, "amqp://guest:REDACTED@mq:5672/", r.Broker.URL)
	assert.Contains(t, cfg.Database.URL, "s3cret", "original untouched")
}
