// Package pgembed runs the appliance's embedded PostgreSQL: it finds the
// distribution's server binaries (it never downloads any), owns a data
// directory, starts and stops the server through
// github.com/fergusstrange/embedded-postgres, and, when started as root, runs
// PostgreSQL as an unprivileged user because PostgreSQL refuses root.
//
// Layout of Config.Dir: data/ (the cluster), runtime/ (scratch, wiped by the
// library on every start), pgbin/bin/ (generated wrappers for pg_ctl and
// initdb), socket/ (unix socket, unless Dir is too long for one),
// postgres.log, pgembed.json (port, user, password; 0600) and pgembed.lock.
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
)

// Config for an embedded PostgreSQL instance. Only Dir is required.
type Config struct {
	// Dir is the root directory owned by pgembed, e.g.
	// <appliance-data-dir>/postgres. It must be empty or new on first use.
	Dir string
	// BinDir optionally names the directory with initdb/pg_ctl/postgres;
	// "" discovers it with FindBinDir.
	BinDir string
	// Port 0 reuses the port remembered in Dir if it is still free, else
	// picks a free loopback port (never 5432) and remembers it.
	Port uint32
	// Database is created on first start if missing; default "attune".
	Database string
	// Username is the cluster's superuser, fixed at initialization; default "attune".
	Username string
	// Password defaults to a random one generated on first start and kept
	// (0600) in Dir so restarts reuse it. It cannot change after the
	// cluster is initialized.
	Password string
	// StartTimeout bounds server start-up and the readiness check; default 60s.
	StartTimeout time.Duration
	// Logger receives pgembed's own events; default slog.Default().
	// PostgreSQL's output goes to <Dir>/postgres.log, not here.
	Logger *slog.Logger
}

// Server is a running embedded PostgreSQL, returned by Start.
type Server struct {
	mu      sync.Mutex
	ep      *embeddedpostgres.EmbeddedPostgres
	l       *layout
	port    uint32
	url     string
	log     *slog.Logger
	lock    *os.File
	stopped bool
}

var (
	usernameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	badPasswordSet = " \t\r\n'\"\\"
	badDirSet      = "\"\\$`\n\r\x00"
)

// withDefaults validates cfg and fills in defaults, so that bad input fails
// before anything touches the disk.
func (cfg Config) withDefaults() (Config, error) {
	c := cfg
	if c.Dir == "" {
		return c, errors.New("config: Dir is required")
	}
	if strings.ContainsAny(c.Dir, badDirSet) {
		// pg_ctl builds a shell command with the data dir in double quotes.
		return c, fmt.Errorf("config: Dir %q must not contain \", \\, $, ` or newlines", c.Dir)
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return c, fmt.Errorf("config: Dir: %w", err)
	}
	c.Dir = abs
	if c.Database == "" {
		c.Database = "attune"
	}
	if len(c.Database) > 63 || strings.ContainsRune(c.Database, 0) {
		return c, fmt.Errorf("config: Database %q must be 1-63 bytes without NUL", c.Database)
	}
	if c.Username == "" {
		c.Username = "attune"
	}
	if !usernameRE.MatchString(c.Username) {
		return c, fmt.Errorf("config: Username %q must be 1-63 letters, digits or _, not starting with a digit", c.Username)
	}
	if strings.ContainsAny(c.Password, badPasswordSet) || len(c.Password) > 100 {
		// embedded-postgres puts the password unquoted into a connection string.
		return c, errors.New("config: Password must be at most 100 characters without spaces, quotes or backslashes")
	}
	if c.StartTimeout < 0 {
		return c, fmt.Errorf("config: StartTimeout %v is negative", c.StartTimeout)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Start initializes the cluster in cfg.Dir if needed (keeping existing data),
// starts PostgreSQL on 127.0.0.1, creates cfg.Database if missing and returns
// once it accepts connections. On error nothing is left running. ctx bounds
// start-up only; the server runs until Stop.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	began := time.Now()
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	log := c.Logger
	binDir, err := FindBinDir(c.BinDir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	major, err := binaryMajor(ctx, binDir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}

	l := newLayout(c.Dir)
	l.realBin = binDir
	l.socketDir = socketDirFor(c.Dir)
	if os.Geteuid() == 0 {
		if l.runAs, err = serverUser(log); err != nil {
			return nil, fmt.Errorf("pgembed: %w", err)
		}
	}
	st, hasState, err := loadState(l.stateFile)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	if err := prepareDir(l, hasState); err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	lock, err := lockDir(l.lockFile)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	s := &Server{l: l, log: log, lock: lock}
	if err := s.start(ctx, c, major, st, hasState); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("pgembed: start PostgreSQL %d in %s: %w", major, c.Dir, err)
	}
	log.Info("pgembed: PostgreSQL started", "version", major, "port", s.port, "dir", c.Dir,
		"log", l.logFile, "run_as", runAsName(l), "took", time.Since(began).Round(time.Millisecond))
	return s, nil
}

func runAsName(l *layout) string {
	if l.runAs == nil {
		return "current user"
	}
	return l.runAs.name
}

// start does the work of Start once Dir is locked.
func (s *Server) start(ctx context.Context, c Config, major int, st state, hasState bool) error {
	l, log := s.l, s.log
	cluster := readPGVersion(l.dataDir)
	if cluster != "" && hasState && !st.Initialized {
		// A first start died between initdb and readiness (initdb writes
		// PG_VERSION early): the half-made cluster holds nothing, redo it.
		log.Warn("pgembed: discarding a cluster whose first start did not complete", "data_dir", l.dataDir)
		if err := os.RemoveAll(l.dataDir); err != nil {
			return fmt.Errorf("remove incomplete cluster: %w", err)
		}
		cluster = ""
	}
	if cluster != "" && cluster != strconv.Itoa(major) {
		// The library would wipe a cluster of another version: refuse instead.
		return fmt.Errorf("data dir %s holds a PostgreSQL %s cluster but the binaries in %s are version %d; "+
			"set BinDir to PostgreSQL %s binaries or upgrade the cluster with pg_upgrade", l.dataDir, cluster, l.realBin, major, cluster)
	}
	if cluster != "" {
		if st.Username != "" && st.Username != c.Username {
			return fmt.Errorf("the cluster was initialized with superuser %q; Username %q cannot change afterwards", st.Username, c.Username)
		}
		switch {
		case c.Password == "" && st.Password == "":
			return fmt.Errorf("the cluster exists but %s holds no password; set Config.Password to the one it was initialized with", l.stateFile)
		case c.Password == "":
			c.Password = st.Password
		case st.Password != "" && st.Password != c.Password:
			return errors.New("Password differs from the one the cluster was initialized with; it cannot change afterwards (change it with ALTER ROLE, then update Config)")
		}
	} else if c.Password == "" {
		c.Password = st.Password
		if c.Password == "" {
			var err error
			if c.Password, err = randomPassword(); err != nil {
				return err
			}
		}
	}
	port, err := choosePort(c.Port, st.Port)
	if err != nil {
		return err
	}
	// Saved before initdb so that a crash never loses the password the cluster gets.
	st = state{Port: port, Username: c.Username, Password: c.Password, Initialized: cluster != "" && st.Initialized}
	if err := saveState(l.stateFile, st); err != nil {
		return err
	}

	if l.runAs != nil {
		if err := rootPrepare(l, log); err != nil {
			return err
		}
	} else {
		if err := checkDataOwner(l); err != nil {
			return err
		}
		if f, err := os.OpenFile(l.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			_ = f.Close()
		}
	}
	if err := prepareSocketDir(l.socketDir, l.runAs); err != nil {
		return err
	}
	if err := clearStalePidFile(l.dataDir, log); err != nil {
		return err
	}
	if err := writeWrappers(l, int((c.StartTimeout+time.Second-1)/time.Second)); err != nil {
		return err
	}
	rotateLog(l.logFile, 10<<20)
	var logStart int64
	if fi, err := os.Stat(l.logFile); err == nil {
		logStart = fi.Size()
	}

	for attempt := 0; ; attempt++ {
		s.ep = embeddedpostgres.NewDatabase(libraryConfig(l, major, port, c))
		err = runLibraryStart(ctx, s.ep, l)
		if err == nil {
			break
		}
		_ = ensureStopped(l, 2*time.Second)
		if c.Port == 0 && attempt < 2 && ctx.Err() == nil && strings.Contains(err.Error(), "already listening on port") {
			// Someone took the port between our check and the library's.
			if port, err = choosePort(0, 0); err != nil {
				return err
			}
			st.Port = port
			if err := saveState(l.stateFile, st); err != nil {
				return err
			}
			continue
		}
		if tail := logTail(l.logFile, logStart); tail != "" {
			err = fmt.Errorf("%w\n--- %s ---\n%s", err, l.logFile, tail)
		}
		return err
	}
	if err := ensureDatabase(ctx, port, c.Username, c.Password, c.Database); err != nil {
		_ = s.ep.Stop()
		_ = ensureStopped(l, 5*time.Second)
		return err
	}
	st.Initialized = true
	if err := saveState(l.stateFile, st); err != nil {
		_ = s.ep.Stop()
		_ = ensureStopped(l, 5*time.Second)
		return err
	}
	s.port = port
	s.url = (&url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(c.Username, c.Password),
		Host:     fmt.Sprintf("127.0.0.1:%d", port),
		Path:     "/" + c.Database,
		RawQuery: "sslmode=disable",
	}).String()
	return nil
}

// URL returns the connection URL,
// postgres://user:pass@127.0.0.1:port/db?sslmode=disable (TLS is pointless
// on loopback).
func (s *Server) URL() string { return s.url }

// Port returns the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() uint32 { return s.port }

// Stop shuts PostgreSQL down (fast mode: sessions are disconnected,
// nothing committed is lost) and makes sure no postgres process of this data
// dir is left, escalating to an immediate shutdown and SIGKILL if needed.
// It is idempotent and releases Dir for the next Start.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	defer func() { _ = s.lock.Close() }()
	stopErr := s.ep.Stop()
	if err := ensureStopped(s.l, 5*time.Second); err != nil {
		return fmt.Errorf("pgembed: stop PostgreSQL in %s: %w", s.l.dir, errors.Join(stopErr, err))
	}
	if stopErr != nil {
		// The fallback got it down; worth knowing, not worth failing for.
		s.log.Warn("pgembed: pg_ctl stop failed; forced PostgreSQL down", "dir", s.l.dir, "err", stopErr)
	}
	if s.l.socketDir != filepath.Join(s.l.dir, "socket") {
		_ = os.Remove(s.l.socketDir) // our /tmp fallback; only removed when empty
	}
	return nil
}
