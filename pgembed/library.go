package pgembed

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
	"github.com/lib/pq"
)

// libraryConfig points embedded-postgres at our wrappers and directories.
// The cluster is initialized with locale C and UTF8 so that it behaves the
// same on every host (no dependency on the host's locales or their collation
// changes). The library's database is "postgres": we create ours afterwards,
// so a start interrupted before that step is repaired by the next one.
func libraryConfig(l *layout, major int, port uint32, c Config) embeddedpostgres.Config {
	return embeddedpostgres.DefaultConfig().
		Version(libraryVersion(major)).
		Port(port).
		Database("postgres").
		Username(c.Username).
		Password(c.Password).
		RuntimePath(l.runtimeDir).
		DataPath(l.dataDir).
		BinariesPath(l.wrapperRoot).
		CachePath(l.wrapperRoot).
		BinaryRepositoryURL("http://127.0.0.1:1/pgembed-never-downloads").
		Locale("C").
		Encoding("UTF8").
		StartParameters(map[string]string{
			"listen_addresses":        "127.0.0.1",
			"unix_socket_directories": l.socketDir,
		}).
		StartTimeout(c.StartTimeout).
		Logger(nil) // our wrappers already send everything to <Dir>/postgres.log
}

// runLibraryStart runs the library's blocking Start and honours ctx by
// killing the postgres processes it is waiting for (initdb then fails and
// cleans up after itself; pg_ctl -w gives up).
func runLibraryStart(ctx context.Context, ep *embeddedpostgres.EmbeddedPostgres, l *layout) error {
	if _, err := os.Stat(filepath.Join(l.wrapperRoot, "bin", "pg_ctl")); err != nil {
		// Without it the library would try to download PostgreSQL.
		return fmt.Errorf("%w: wrapper %s missing", ErrNoBinaries, filepath.Join(l.wrapperRoot, "bin", "pg_ctl"))
	}
	before := libraryTempLogs()
	defer removeNewTempLogs(before)
	done := make(chan error, 1)
	go func() { done <- ep.Start() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	for {
		for _, pid := range serverProcesses(l.dataDir) {
			_ = killPid(pid)
		}
		select {
		case <-done:
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureDatabase creates the application database if it does not exist yet.
func ensureDatabase(ctx context.Context, port uint32, user, password, name string) error {
	q := func(v string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'" }
	conn, err := pq.NewConnector(fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=postgres sslmode=disable connect_timeout=10",
		port, q(user), q(password)))
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", name, err)
	}
	db := sql.OpenDB(conn)
	defer func() { _ = db.Close() }()
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("check database %q: %w", name, err)
	}
	if !exists {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
			return fmt.Errorf("create database %q: %w", name, err)
		}
	}
	// embedded-postgres v1.34's readiness check never closes its result set,
	// so its connection stays open, idle, for the server's lifetime. Nothing
	// else uses this server yet, so end that session to give the slot back.
	_, _ = db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = 'postgres' AND usename = current_user AND pid <> pg_backend_pid()
		AND backend_type = 'client backend' AND state = 'idle'`)
	return nil
}

// readPGVersion returns the major version in data/PG_VERSION, "" if none:
// it is how both PostgreSQL and the library recognize an initialized cluster.
func readPGVersion(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
