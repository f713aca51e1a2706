package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// These tests run the real PostgreSQL of the machine (Debian: apt-get install
// postgresql). They run as root in CI, which exercises the runuser path.

func startT(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Logf("Start(%s) took %v (port %d)", filepath.Base(cfg.Dir), time.Since(began).Round(time.Millisecond), s.Port())
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func stopT(t *testing.T, s *Server) {
	t.Helper()
	began := time.Now()
	require.NoError(t, s.Stop())
	t.Logf("Stop took %v", time.Since(began).Round(time.Millisecond))
}

func connect(t *testing.T, s *Server) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// postgresProcs finds processes whose command line names dataDir (the
// postmaster's does) or whose working directory is dataDir (every backend's).
func postgresProcs(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		line := strings.ReplaceAll(string(cmd), "\x00", " ")
		if strings.Contains(line, dataDir) || cwd == dataDir {
			found = append(found, e.Name()+": "+line)
		}
	}
	return found
}

func requireNoProcs(t *testing.T, dir string) {
	t.Helper()
	require.Empty(t, postgresProcs(t, filepath.Join(dir, "data")), "postgres processes left behind")
}

func TestStartStopKeepsData(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "postgres")
	s := startT(t, Config{Dir: dir})
	require.Regexp(t, `^postgres://attune:[0-9a-f]{48}@127\.0\.0\.1:\d+/attune\?sslmode=disable$`, s.URL())
	require.NotEqual(t, uint32(5432), s.Port())
	require.NotEmpty(t, postgresProcs(t, filepath.Join(dir, "data")))

	ctx := context.Background()
	conn := connect(t, s)
	_, err := conn.Exec(ctx, `CREATE TABLE kept (id int PRIMARY KEY, note text)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO kept VALUES (1, 'survives restarts')`)
	require.NoError(t, err)
	var enc string
	require.NoError(t, conn.QueryRow(ctx, `SHOW server_encoding`).Scan(&enc))
	require.Equal(t, "UTF8", enc)
	var checksums string
	require.NoError(t, conn.QueryRow(ctx, `SHOW data_checksums`).Scan(&checksums))
	require.Equal(t, "on", checksums)
	var others int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&others))
	require.Zero(t, others, "no leftover start-up sessions")
	require.NoError(t, conn.Close(ctx))

	fi, err := os.Stat(filepath.Join(dir, "pgembed.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "state file holds the password")

	firstURL, firstPort := s.URL(), s.Port()
	stopT(t, s)
	require.NoError(t, s.Stop(), "Stop is idempotent")
	requireNoProcs(t, dir)

	s2 := startT(t, Config{Dir: dir})
	require.Equal(t, firstPort, s2.Port(), "remembered port is reused")
	require.Equal(t, firstURL, s2.URL(), "remembered password is reused")
	var note string
	require.NoError(t, connect(t, s2).QueryRow(ctx, `SELECT note FROM kept WHERE id = 1`).Scan(&note))
	require.Equal(t, "survives restarts", note)
	stopT(t, s2)
	requireNoProcs(t, dir)

	entries, _ := filepath.Glob(filepath.Join(os.TempDir(), "embedded_postgres_log*"))
	for _, e := range entries {
		fi, err := os.Stat(e)
		if err == nil && time.Since(fi.ModTime()) < time.Minute {
			t.Logf("note: library temp log %s exists (maybe another package's test)", e)
		}
	}
}

func TestTwoInstancesSideBySide(t *testing.T) {
	t.Parallel()
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	servers := make([]*Server, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = Start(context.Background(), Config{Dir: dirs[i], Database: fmt.Sprintf("db%d", i)})
		}()
	}
	wg.Wait()
	for i := range dirs {
		require.NoError(t, errs[i])
		t.Cleanup(func() { _ = servers[i].Stop() })
	}
	require.NotEqual(t, servers[0].Port(), servers[1].Port())
	for i, s := range servers {
		var db string
		require.NoError(t, connect(t, s).QueryRow(context.Background(), `SELECT current_database()`).Scan(&db))
		require.Equal(t, fmt.Sprintf("db%d", i), db)
	}
	for i, s := range servers {
		stopT(t, s)
		requireNoProcs(t, dirs[i])
	}
}

func TestSameDirTwiceIsRefused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pg")
	s := startT(t, Config{Dir: dir})
	_, err := Start(context.Background(), Config{Dir: dir})
	require.ErrorIs(t, err, ErrDataDirInUse)

	// An orphaned postmaster (its pgembed process died, so the lock is gone)
	// must be reported, not fought with.
	require.NoError(t, s.lock.Close())
	_, err = Start(context.Background(), Config{Dir: dir})
	require.ErrorIs(t, err, ErrDataDirInUse)
	require.Contains(t, err.Error(), "is running on")
	stopT(t, s)
	requireNoProcs(t, dir)
}

func TestStalePidFileFromCrash(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pg")
	s := startT(t, Config{Dir: dir})
	stopT(t, s)

	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	// A dead pid, then a live pid that is not postgres (pid reuse after a
	// reboot or in a container): both must be treated as stale.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	for _, pid := range []int{dead.Process.Pid, live.Process.Pid} {
		content := fmt.Sprintf("%d\n%s\n1700000000\n%d\n/tmp\n127.0.0.1\n  5432001  0\nready\n",
			pid, filepath.Join(dir, "data"), s.Port())
		require.NoError(t, os.WriteFile(pidFile, []byte(content), 0o600))
		s2 := startT(t, Config{Dir: dir})
		require.NoError(t, connect(t, s2).Ping(context.Background()))
		stopT(t, s2)
		requireNoProcs(t, dir)
	}
}

func TestLongDirUsesShortSocketDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("very-long-directory-name-", 4), "postgres")
	require.Greater(t, len(dir), maxSocketDirLen)
	s := startT(t, Config{Dir: dir, Username: "app_user", Password: "s3cret-Pass", Database: "my-db"})
	require.True(t, strings.HasPrefix(s.l.socketDir, os.TempDir()), s.l.socketDir)
	require.FileExists(t, filepath.Join(s.l.socketDir, fmt.Sprintf(".s.PGSQL.%d", s.Port())))
	require.Contains(t, s.URL(), "app_user:s3cret-Pass@")
	require.NoError(t, connect(t, s).Ping(context.Background()))
	stopT(t, s)
	requireNoProcs(t, dir)

	_, err := Start(context.Background(), Config{Dir: dir, Username: "app_user", Password: "other"})
	require.ErrorContains(t, err, "cannot change")
}

func TestCancelledStartLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pg")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := Start(ctx, Config{Dir: dir})
	if err == nil { // a very fast machine finished first
		stopT(t, s)
	} else {
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	requireNoProcs(t, dir)
	s = startT(t, Config{Dir: dir})
	require.NoError(t, connect(t, s).Ping(context.Background()))
	stopT(t, s)
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := FindBinDir("")
	require.NoError(t, err)
	require.True(t, isBinDir(dir), dir)

	parent, err := FindBinDir(filepath.Dir(dir))
	require.NoError(t, err, "the parent of bin is accepted too")
	require.Equal(t, dir, parent)

	_, err = FindBinDir("/nonexistent/bogus/bin")
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "/nonexistent/bogus/bin")
	require.ErrorContains(t, err, "install PostgreSQL server binaries (e.g. apt-get install postgresql)")
	require.ErrorContains(t, err, "pass --database-url to use an external PostgreSQL")

	_, err = Start(context.Background(), Config{Dir: t.TempDir(), BinDir: "/nonexistent/bogus/bin"})
	require.ErrorIs(t, err, ErrNoBinaries)
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	cases := map[string]Config{
		"Dir is required":           {},
		"must not contain":          {Dir: t.TempDir() + `/a"b`},
		"Username":                  {Dir: t.TempDir(), Username: "bad name"},
		"Password must":             {Dir: t.TempDir(), Password: "has space"},
		"StartTimeout":              {Dir: t.TempDir(), StartTimeout: -time.Second},
		"is not empty and has no":   {Dir: filepath.Dir(mustWrite(t, "precious.txt"))},
		"holds a PostgreSQL 9 clus": {Dir: fakeCluster(t, "9")},
	}
	for want, cfg := range cases {
		_, err := Start(context.Background(), cfg)
		require.ErrorContains(t, err, want)
	}
	_, err := os.Stat(mustWrite(t, "precious.txt"))
	require.NoError(t, err)
}

func mustWrite(t *testing.T, name string) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte("keep me"), 0o600))
	return p
}

// fakeCluster makes a Dir that pgembed initialized with another major version.
func fakeCluster(t *testing.T, major string) string {
	dir := t.TempDir()
	require.NoError(t, saveState(filepath.Join(dir, "pgembed.json"), state{Username: "attune", Password: "x", Initialized: true}))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "PG_VERSION"), []byte(major+"\n"), 0o600))
	return dir
}

func TestHighestFirst(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"9.6", "15", "13", "16"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, v, "bin"), 0o755))
	}
	got := highestFirst(filepath.Join(dir, "*", "bin"))
	require.Equal(t, filepath.Join(dir, "16", "bin"), got[0])
	require.Equal(t, filepath.Join(dir, "9.6", "bin"), got[3])
	require.True(t, errors.Is(fmt.Errorf("x: %w", ErrNoBinaries), ErrNoBinaries))
}
