package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
)

// ErrNoBinaries means no usable PostgreSQL server binaries (initdb, pg_ctl,
// postgres) were found. The appliance never downloads PostgreSQL (it must work
// offline), so callers test for this with errors.Is to tell the operator to
// install the distribution's package or to use an external database.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found")

// noBinariesHint names both ways out, because the operator who sees this error
// usually does not know that --database-url exists.
const noBinariesHint = "install PostgreSQL server binaries (e.g. apt-get install postgresql) " +
	"or pass --database-url to use an external PostgreSQL"

// serverTools are the programs a bin dir must hold: embedded-postgres execs
// initdb and pg_ctl, and both of those exec postgres from their own directory.
var serverTools = []string{"initdb", "pg_ctl", "postgres"}

// FindBinDir returns the directory holding PostgreSQL's server programs.
//
// A non-empty configured path must be valid (a bin dir, or a dir whose bin/
// subdirectory is valid): the operator asked for it, so silently using another
// installation would be surprising. Otherwise it looks, in order, at
// /usr/lib/postgresql/<highest>/bin (Debian/Ubuntu), /usr/pgsql-<highest>/bin
// (PGDG RPMs), `pg_config --bindir`, and initdb on PATH. The error wraps
// ErrNoBinaries and names the fixes.
func FindBinDir(configured string) (string, error) {
	if configured != "" {
		for _, cand := range []string{configured, filepath.Join(configured, "bin")} {
			if isBinDir(cand) {
				return filepath.Abs(cand)
			}
		}
		return "", fmt.Errorf("%w: configured PostgreSQL bin dir %q does not contain %s; %s",
			ErrNoBinaries, configured, strings.Join(serverTools, ", "), noBinariesHint)
	}

	var tried []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"} {
		for _, cand := range highestFirst(pattern) {
			tried = append(tried, cand)
			if isBinDir(cand) {
				return cand, nil
			}
		}
		tried = append(tried, pattern)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		cand := strings.TrimSpace(string(out))
		tried = append(tried, cand+" (pg_config --bindir)")
		if isBinDir(cand) {
			return cand, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		cand := filepath.Dir(p)
		tried = append(tried, cand+" (initdb on PATH)")
		if isBinDir(cand) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%w (looked in %s); %s", ErrNoBinaries, strings.Join(dedupe(tried), ", "), noBinariesHint)
}

// isBinDir reports whether dir holds executable initdb, pg_ctl and postgres.
func isBinDir(dir string) bool {
	for _, tool := range serverTools {
		fi, err := os.Stat(filepath.Join(dir, tool))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// highestFirst globs pattern and sorts the matches by the version number in
// them, highest first, so "15" beats "9.6" (a plain string sort would not).
func highestFirst(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	key := func(s string) []int {
		var out []int
		for _, f := range regexp.MustCompile(`\d+`).FindAllString(s, -1) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		return out
	}
	sort.SliceStable(matches, func(i, j int) bool {
		a, b := key(matches[i]), key(matches[j])
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return len(a) > len(b)
	})
	return matches
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?`)

// binaryMajor asks the binaries themselves for their major version, because
// the directory name (or a PATH lookup) does not reliably say which PostgreSQL
// they are. `postgres --version` is allowed even as root.
func binaryMajor(ctx context.Context, binDir string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	bin := filepath.Join(binDir, "postgres")
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("run %s --version: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return 0, fmt.Errorf("cannot parse PostgreSQL version from %q", strings.TrimSpace(string(out)))
	}
	major, _ := strconv.Atoi(m[1])
	if major < 10 {
		return 0, fmt.Errorf("PostgreSQL %s.%s at %s is too old: pgembed needs 10 or newer; %s",
			m[1], m[2], binDir, noBinariesHint)
	}
	return major, nil
}

// libraryVersion maps a major version onto embedded-postgres' version type.
// The library only uses it to name a download (which never happens here) and
// to compare with data/PG_VERSION by prefix, so majors newer than the library
// knows work with a synthetic "N.0.0".
func libraryVersion(major int) embeddedpostgres.PostgresVersion {
	known := map[int]embeddedpostgres.PostgresVersion{
		18: embeddedpostgres.V18, 17: embeddedpostgres.V17, 16: embeddedpostgres.V16,
		15: embeddedpostgres.V15, 14: embeddedpostgres.V14, 13: embeddedpostgres.V13,
		12: embeddedpostgres.V12, 11: embeddedpostgres.V11, 10: embeddedpostgres.V10,
	}
	if v, ok := known[major]; ok {
		return v
	}
	return embeddedpostgres.PostgresVersion(fmt.Sprintf("%d.0.0", major))
}
