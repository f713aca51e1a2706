package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrDataDirInUse means a live server already uses the data directory (a
// Server in this or another process, or an orphaned postgres left by a
// crashed run). Starting a second postmaster on one cluster would corrupt it.
var ErrDataDirInUse = errors.New("PostgreSQL data directory is in use")

func sysStat(fi os.FileInfo) (*syscall.Stat_t, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// clearStalePidFile handles the postmaster.pid a crashed run leaves behind.
// PostgreSQL ignores a pid file whose pid is dead, but refuses when the pid
// was reused by any other live process (common in containers, where pids
// restart low), so we remove it unless its pid is a postgres of this data dir.
func clearStalePidFile(dataDir string, log *slog.Logger) error {
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", pidFile, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	if pid > 0 {
		switch ours, known := isServerOf(pid, dataDir); {
		case ours:
			return fmt.Errorf("%w: postgres pid %d is running on %s (an earlier run did not stop it); "+
				"stop it with `pg_ctl stop -D %s` or `kill %d`", ErrDataDirInUse, pid, dataDir, dataDir, pid)
		case !known:
			// Alive but not inspectable (no /proc): let postgres decide.
			return nil
		}
	}
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", pidFile, err)
	}
	log.Warn("pgembed: removed stale postmaster.pid left by a crashed run", "pid", pid, "data_dir", dataDir)
	return nil
}

// isServerOf reports whether pid is a postgres process working in dataDir.
// known is false when pid is alive but we cannot look at it.
func isServerOf(pid int, dataDir string) (ours, known bool) {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false, true
	}
	if _, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, true // exited meanwhile
		}
		return false, false // no /proc, or another user's process
	}
	return procIsServerOf(pid, resolved(dataDir)), true
}

// procIsServerOf decides by the process name and its working directory: every
// postgres process (postmaster, backends, initdb's bootstrap backend) chdirs
// into the data dir, while the rewritten titles of backends no longer name it.
// Requiring the name "postgres" keeps a shell that merely cd'ed there safe.
func procIsServerOf(pid int, dataDirResolved string) bool {
	base := fmt.Sprintf("/proc/%d", pid)
	cwd, err := os.Readlink(base + "/cwd")
	if err != nil || cwd != dataDirResolved {
		return false
	}
	comm, _ := os.ReadFile(base + "/comm")
	if strings.TrimSpace(string(comm)) == "postgres" {
		return true
	}
	exe, _ := os.Readlink(base + "/exe")
	return filepath.Base(exe) == "postgres"
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// serverProcesses lists the postgres processes working in dataDir.
func serverProcesses(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	dd := resolved(dataDir)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if procIsServerOf(pid, dd) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ensureStopped makes sure no postgres process of this data dir survives:
// after a failed start, a failed pg_ctl stop, or a cancelled context. It
// first asks pg_ctl for an immediate shutdown, then waits, then SIGKILLs.
func ensureStopped(l *layout, grace time.Duration) error {
	if _, err := os.Stat(filepath.Join(l.dataDir, "postmaster.pid")); err == nil && len(serverProcesses(l.dataDir)) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = exec.CommandContext(ctx, filepath.Join(l.wrapperRoot, "bin", "pg_ctl"),
			"stop", "-m", "immediate", "-w", "-D", l.dataDir).Run()
		cancel()
	}
	if waitGone(l.dataDir, grace) {
		return nil
	}
	for _, pid := range serverProcesses(l.dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if waitGone(l.dataDir, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("postgres processes %v of %s did not exit", serverProcesses(l.dataDir), l.dataDir)
}

func waitGone(dataDir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(serverProcesses(dataDir)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// libraryTempLogs lists files this process holds open under the name
// embedded-postgres v1.34 gives its log (os.CreateTemp("",
// "embedded_postgres_log")). The library never removes that file; since our
// wrappers send all output to <Dir>/postgres.log it stays empty, and we
// unlink the new ones after each Start so restarts do not litter os.TempDir.
// (The library keeps the descriptor open; that is one fd per Start.)
func libraryTempLogs() map[string]bool {
	out := map[string]bool{}
	prefix := filepath.Join(os.TempDir(), "embedded_postgres_log")
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, prefix) {
			out[target] = true
		}
	}
	return out
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

func removeNewTempLogs(before map[string]bool) {
	for p := range libraryTempLogs() {
		if !before[p] {
			_ = os.Remove(p)
		}
	}
}
