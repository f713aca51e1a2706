package packs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// entrypoint resolves a script entrypoint to an absolute path, or records why
// it cannot. Relative paths are relative to baseDir (the action file's
// directory), so an action and its script can sit side by side. The file
// must stay inside the pack even through symlinks: a pack must not be able to
// point the worker at arbitrary files on the host.
func (d *decoder) entrypoint(entry, rt, pack, packDir, baseDir string) string {
	const field = "entrypoint"
	if entry == "" {
		d.fail(field, "is required for runtime %s: the script file to run", rt)
		return ""
	}
	if packDir == "" {
		if !filepath.IsAbs(entry) {
			d.fail(field, "%q is relative, but actions registered through the API have no pack directory: use runtime builtin or an absolute path to an existing file", entry)
			return ""
		}
		path := filepath.Clean(entry)
		if msg := checkFile(path); msg != "" {
			d.fail(field, "file %s %s", path, msg)
			return ""
		}
		return path
	}

	packAbs, err := filepath.Abs(packDir)
	if err != nil {
		d.fail(field, "pack directory %s: %v", packDir, err)
		return ""
	}
	if baseDir == "" {
		baseDir = packAbs
	}
	path := entry
	if !filepath.IsAbs(path) {
		path = filepath.Join(baseDir, path)
	}
	path, err = filepath.Abs(path)
	if err != nil {
		d.fail(field, "%q: %v", entry, err)
		return ""
	}
	rel, inside := within(packAbs, path)
	if !inside {
		d.fail(field, "%s is outside pack %s", entry, pack)
		return ""
	}
	if msg := checkFile(path); msg != "" {
		if msg == "not found" {
			d.fail(field, "file %s not found in pack %s", filepath.ToSlash(rel), pack)
		} else {
			d.fail(field, "file %s in pack %s %s", filepath.ToSlash(rel), pack, msg)
		}
		return ""
	}
	realPack, err1 := filepath.EvalSymlinks(packAbs)
	realPath, err2 := filepath.EvalSymlinks(path)
	if err := errors.Join(err1, err2); err != nil {
		d.fail(field, "%s: %v", entry, err)
		return ""
	}
	if _, inside := within(realPack, realPath); !inside {
		d.fail(field, "%s is a symlink to %s, outside pack %s", entry, realPath, pack)
		return ""
	}
	return path
}

// within reports whether path is inside dir (both absolute and clean), and
// the relative path.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return rel, false
	}
	return rel, rel != "."
}

// checkFile returns "" for an existing regular file, else what is wrong.
func checkFile(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not found"
	case err != nil:
		return "cannot be read: " + err.Error()
	case fi.IsDir():
		return "is a directory, not a script"
	case !fi.Mode().IsRegular():
		return "is not a regular file"
	}
	return ""
}
