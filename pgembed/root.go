package pgembed

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// osUser is the unprivileged account the server runs as when we are root.
type osUser struct {
	name     string
	uid, gid int
}

// fallbackUser is created when no "postgres" account exists. A dedicated
// system user (not "nobody") is needed because it must own the data dir, and
// files owned by nobody are writable by every other daemon running as nobody.
const fallbackUser = "attune-pg"

var userMu sync.Mutex // serializes the lookup-or-create of fallbackUser

// serverUser picks the account for PostgreSQL when running as root:
// "postgres" (created by the distribution's package) if it exists, else
// fallbackUser, created with useradd (or busybox adduser) if missing.
func serverUser(log *slog.Logger) (*osUser, error) {
	userMu.Lock()
	defer userMu.Unlock()
	for _, name := range []string{"postgres", fallbackUser} {
		if u, err := lookupUser(name); err == nil {
			return u, nil
		}
	}
	var cmd *exec.Cmd
	if _, err := exec.LookPath("useradd"); err == nil {
		cmd = exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", fallbackUser)
	} else if _, err := exec.LookPath("adduser"); err == nil {
		cmd = exec.Command("adduser", "-S", "-D", "-H", "-h", "/nonexistent", "-s", "/sbin/nologin", fallbackUser)
	} else {
		return nil, fmt.Errorf("running as root: PostgreSQL refuses root and there is no %q or %q user, "+
			"and neither useradd nor adduser is available to create one; create a system user %q or run as a non-root user",
			"postgres", fallbackUser, fallbackUser)
	}
	out, err := cmd.CombinedOutput()
	if u, lerr := lookupUser(fallbackUser); lerr == nil { // another process may have won the race
		log.Info("pgembed: created system user for PostgreSQL (it refuses to run as root)", "user", fallbackUser)
		return u, nil
	}
	return nil, fmt.Errorf("create system user %q for PostgreSQL (it refuses to run as root): %v: %s",
		fallbackUser, err, strings.TrimSpace(string(out)))
}

func lookupUser(name string) (*osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s has non-numeric ids", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s is root", name)
	}
	return &osUser{name: name, uid: uid, gid: gid}, nil
}

// rootPrepare sets up ownership when we are root and the server runs as
// l.runAs.
//
// Dir itself, the wrappers and the state file stay root's: the wrappers run
// as root, so if the server's user could rewrite them (or rename entries in
// Dir), anyone who gets SQL superuser (COPY ... TO PROGRAM runs as that user)
// would get root on the next restart. The user owns only what PostgreSQL
// writes: data/ (created by the initdb wrapper), the socket dir and the log.
func rootPrepare(l *layout, log *slog.Logger) error {
	u := l.runAs
	fi, err := os.Lstat(l.dir)
	if err != nil {
		return err
	}
	if fileUID(fi) == u.uid {
		if err := os.Lchown(l.dir, 0, 0); err != nil {
			return fmt.Errorf("chown %s to root: %w", l.dir, err)
		}
	}
	if err := os.Chmod(l.dir, 0o711); err != nil {
		return fmt.Errorf("chmod %s: %w", l.dir, err)
	}
	if err := ensureTraversable(l.dir, u, log); err != nil {
		return err
	}

	f, err := os.OpenFile(l.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create log file: %w", err)
	}
	err = f.Chown(u.uid, u.gid) // fchown: no path, no symlink games
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("chown log file: %w", err)
	}

	if fi, err := os.Lstat(l.dataDir); err == nil {
		if !fi.IsDir() || fileUID(fi) != u.uid {
			return fmt.Errorf("data dir %s must be a directory owned by %s (PostgreSQL runs as that user when "+
				"started as root); fix with: chown -R %s: %s", l.dataDir, u.name, u.name, l.dataDir)
		}
	}

	// Catch permission problems (root_squash, restrictive parents) here, with a
	// clear message, instead of as an obscure initdb failure.
	out, err := exec.Command("runuser", "-u", u.name, "--", "test", "-x", l.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("user %s cannot reach %s (PostgreSQL runs as that user when started as root; "+
			"every parent directory needs o+x or must belong to it): %v %s", u.name, l.dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensureTraversable gives "others" execute (traverse, not list) permission on
// each parent of dir that the server's user could not otherwise pass, e.g.
// the 0700 directories t.TempDir or /root have. Each change is logged because
// it alters permissions outside Dir.
func ensureTraversable(dir string, u *osUser, log *slog.Logger) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		perm := fi.Mode().Perm()
		uid := fileUID(fi)
		gid := -1
		if st, ok := sysStat(fi); ok {
			gid = int(st.Gid)
		}
		canPass := perm&0o001 != 0 || (uid == u.uid && perm&0o100 != 0) || (gid == u.gid && perm&0o010 != 0)
		if !canPass {
			if err := os.Chmod(p, fi.Mode()&os.ModePerm|0o001|fi.Mode()&(os.ModeSticky|os.ModeSetgid|os.ModeSetuid)); err != nil {
				return fmt.Errorf("let %s traverse %s: %w", u.name, p, err)
			}
			log.Warn("pgembed: added o+x to a parent of the PostgreSQL dir so the server's user can reach it",
				"dir", p, "user", u.name)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// checkDataOwner refuses, when not root, a data dir of another user: postgres
// would refuse it too, but with a less helpful message.
func checkDataOwner(l *layout) error {
	fi, err := os.Lstat(l.dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() || fileUID(fi) != os.Getuid() {
		return fmt.Errorf("data dir %s must be a directory owned by the current user (uid %d)", l.dataDir, os.Getuid())
	}
	return nil
}
