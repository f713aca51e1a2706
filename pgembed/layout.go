package pgembed

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// layout is where everything of one instance lives. Dir is the only input;
// the rest is derived so that restarts find the same files.
type layout struct {
	dir         string // Config.Dir, absolute
	dataDir     string // the cluster (PGDATA); outside runtimeDir because the library wipes that
	runtimeDir  string // wiped by embedded-postgres on every Start; holds initdb's pwfile
	wrapperRoot string // handed to the library as BinariesPath; bin/ holds our wrappers
	socketDir   string // unix_socket_directories; may live under os.TempDir (see socketDirFor)
	logFile     string // all PostgreSQL, pg_ctl and initdb output
	stateFile   string // port, user, password of this instance
	lockFile    string // flock held while a Server owns Dir
	realBin     string // the distribution's bin dir
	runAs       *osUser
}

func newLayout(dir string) *layout {
	return &layout{
		dir:         dir,
		dataDir:     filepath.Join(dir, "data"),
		runtimeDir:  filepath.Join(dir, "runtime"),
		wrapperRoot: filepath.Join(dir, "pgbin"),
		logFile:     filepath.Join(dir, "postgres.log"),
		stateFile:   filepath.Join(dir, "pgembed.json"),
		lockFile:    filepath.Join(dir, "pgembed.lock"),
	}
}

// state is persisted so that a restart reuses the port clients may have
// remembered and, above all, the password the cluster was initialized with.
type state struct {
	Port     uint32 `json:"port"`
	Username string `json:"username"`
	Password string `json:"password"`
	// Initialized is set once a start got all the way to a ready server with
	// its database, so a cluster without it is a failed first start.
	Initialized bool `json:"initialized"`
}

func loadState(path string) (state, bool, error) {
	var st state
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("read state file: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("state file %s is corrupt (fix or delete it; the password inside is needed "+
			"to reach an existing cluster): %w", path, err)
	}
	return st, true, nil
}

// saveState writes atomically with mode 0600: the file holds the superuser password.
func saveState(path string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // WriteFile keeps the mode of an existing file
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return hex.EncodeToString(b), nil // hex: safe in URLs and in the library's unquoted DSN
}

// choosePort returns the explicit port, else the remembered one while it is
// free, else a free loopback port. 5432 is never picked: it belongs to a
// system PostgreSQL the operator may start later.
func choosePort(explicit, remembered uint32) (uint32, error) {
	if explicit != 0 {
		return explicit, nil
	}
	if remembered != 0 && remembered != 5432 && portFree(remembered) {
		return remembered, nil
	}
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick a free port: %w", err)
		}
		p := uint32(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
		if p != 5432 {
			return p, nil
		}
	}
	return 0, errors.New("pick a free port: only 5432 was offered")
}

func portFree(p uint32) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// maxSocketDirLen keeps "<dir>/.s.PGSQL.65535" inside sun_path (108 bytes
// with the NUL on Linux, 104 on BSDs) with a little margin.
const maxSocketDirLen = 85

var plainPath = regexp.MustCompile(`^[A-Za-z0-9/._-]+$`)

// socketDirFor returns <Dir>/socket when that is short and plain, else a
// directory under os.TempDir() named after a hash of Dir: unix socket paths
// are limited to ~107 bytes and unix_socket_directories is a comma list, so a
// long or unusual Dir cannot hold the socket. The hash keeps it stable across
// restarts and distinct between instances.
func socketDirFor(dir string) string {
	own := filepath.Join(dir, "socket")
	if len(own) <= maxSocketDirLen && plainPath.MatchString(own) {
		return own
	}
	sum := sha256.Sum256([]byte(dir))
	short := filepath.Join(os.TempDir(), "attune-pg-"+hex.EncodeToString(sum[:6]))
	if len(short) > maxSocketDirLen || !plainPath.MatchString(short) {
		short = "/tmp/attune-pg-" + hex.EncodeToString(sum[:6])
	}
	return short
}

// prepareSocketDir creates the socket dir 0700 for the server's user. Under a
// shared /tmp someone else could have planted the name, so an existing entry
// must be a real directory owned by us or by that user.
func prepareSocketDir(path string, u *osUser) error {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create socket dir: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("socket dir: %w", err)
	}
	owner := fileUID(fi)
	if !fi.IsDir() || (owner != os.Getuid() && (u == nil || owner != u.uid)) {
		return fmt.Errorf("socket dir %s exists but is not a directory owned by us; remove it", path)
	}
	if u != nil {
		if err := os.Lchown(path, u.uid, u.gid); err != nil {
			return fmt.Errorf("chown socket dir: %w", err)
		}
	}
	return os.Chmod(path, 0o700)
}

func fileUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// prepareDir creates Dir and refuses a Dir that holds foreign files: the
// library deletes <Dir>/runtime and, when it sees no cluster, <Dir>/data, so a
// mistyped --data-dir must not cost anyone their files. Dir is ours when it
// is empty or holds our state file.
func prepareDir(l *layout, hasState bool) error {
	mode := os.FileMode(0o700)
	if l.runAs != nil {
		// Root keeps Dir itself (wrappers, state) and lets the server's user
		// only traverse it; see rootPrepare for why.
		mode = 0o711
	}
	if err := os.MkdirAll(l.dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", l.dir, err)
	}
	if !hasState {
		entries, err := os.ReadDir(l.dir)
		if err != nil {
			return fmt.Errorf("read %s: %w", l.dir, err)
		}
		for _, e := range entries {
			if n := e.Name(); n != filepath.Base(l.lockFile) && n != filepath.Base(l.stateFile)+".tmp" {
				return fmt.Errorf("%s is not empty and has no %s: refusing to use it for PostgreSQL "+
					"(pgembed deletes data/ and runtime/ inside it); choose an empty or new directory",
					l.dir, filepath.Base(l.stateFile))
			}
		}
	}
	return nil
}

// lockDir takes an exclusive flock on <Dir>/pgembed.lock so two Servers (in
// this or another process) never drive the same cluster. The kernel drops it
// if the process dies, so a crash never leaves Dir locked.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another running pgembed server (this or another process)",
				ErrDataDirInUse, filepath.Dir(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// shQuote quotes s for /bin/sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeWrappers writes <wrapperRoot>/bin/pg_ctl and initdb, which is all
// embedded-postgres v1.34 ever execs (pg_ctl and initdb find postgres next to
// their real selves, so no postgres wrapper is needed). Going through
// wrappers, also when not root, lets us: drop root with runuser; send all
// output to <Dir>/postgres.log via pg_ctl -l (the library would otherwise leave
// the postmaster writing to a temp file forever); pass PGCTLTIMEOUT; run from
// a directory the server's user can read; and guarantee bin/pg_ctl exists so
// the library never tries to download anything.
func writeWrappers(l *layout, ctlTimeoutSecs int) error {
	if err := os.RemoveAll(l.wrapperRoot); err != nil {
		return fmt.Errorf("clear wrapper dir: %w", err)
	}
	bin := filepath.Join(l.wrapperRoot, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("create wrapper dir: %w", err)
	}
	runAs := ""
	chownTo := ""
	if l.runAs != nil {
		runAs = "runuser -u " + shQuote(l.runAs.name) + " -- "
		chownTo = shQuote(fmt.Sprintf("%d:%d", l.runAs.uid, l.runAs.gid))
	}
	head := "#!/bin/sh\n# Generated by attune pgembed on every start; edits are lost.\n" +
		"cd " + shQuote(l.dir) + " || exit 1\n" +
		"exec >>" + shQuote(l.logFile) + " 2>&1\n"

	pgCtl := head +
		"if [ \"$1\" = start ]; then shift; set -- start -l " + shQuote(l.logFile) + " \"$@\"; fi\n" +
		fmt.Sprintf("PGCTLTIMEOUT=%d; export PGCTLTIMEOUT\n", ctlTimeoutSecs) +
		"exec " + runAs + shQuote(filepath.Join(l.realBin, "pg_ctl")) + " \"$@\"\n"

	initdb := head
	if l.runAs != nil {
		// The library writes the pwfile as root (0600) and lets initdb create
		// -D. We hand the pwfile to the server's user and create -D for it, so
		// the user never needs write access to Dir itself.
		initdb += "prev=\nfor a in \"$@\"; do\n" +
			"  case \"$a\" in --pwfile=*) chown -h " + chownTo + " \"${a#--pwfile=}\" || exit 1;; esac\n" +
			"  if [ \"$prev\" = -D ]; then mkdir -p -m 0700 \"$a\" && chown -h " + chownTo + " \"$a\" || exit 1; fi\n" +
			"  prev=$a\ndone\n"
	}
	// Page checksums make silent storage corruption an error instead of wrong data.
	initdb += "exec " + runAs + shQuote(filepath.Join(l.realBin, "initdb")) + " --data-checksums \"$@\"\n"

	for name, body := range map[string]string{"pg_ctl": pgCtl, "initdb": initdb} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			return fmt.Errorf("write %s wrapper: %w", name, err)
		}
	}
	return nil
}

// rotateLog keeps one previous generation, bounding the log across restarts
// without needing PostgreSQL's logging collector.
func rotateLog(path string, limit int64) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > limit {
		_ = os.Rename(path, path+".1")
	}
}

// logTail returns what the log gained since offset (at most the last 4 KiB),
// to put PostgreSQL's own explanation into our errors.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= offset {
		return ""
	}
	b = b[offset:]
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return strings.TrimSpace(string(b))
}
