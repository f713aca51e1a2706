package packs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// CorePack is the ref of the built-in pack; a pack directory may not claim it,
// or its actions would shadow (or be shadowed by) the builtins.
const CorePack = "core"

// Pack is a loaded pack with its actions, ready to be upserted into the store.
type Pack struct {
	Pack    store.Pack
	Actions []store.Action
}

// packFile is pack.yaml.
type packFile struct {
	Ref         string
	Description string
}

// LoadDir loads every pack under root: each subdirectory is a pack with an
// optional pack.yaml (ref, description) and one action per actions/*.yaml
// (or .yml) file. A missing root is not an error (a fresh data directory has
// no packs). Hidden directories are skipped.
//
// Problems are never skipped silently: every broken file is reported, naming
// the file and the field, in one joined error. Packs without problems are
// still returned alongside it, so a caller may choose to log and carry on.
func LoadDir(root string) ([]Pack, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("packs: %w", err)
	}
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("packs: %w", err)
	}
	var packs []Pack
	var errs []error
	seen := map[string]string{} // pack ref -> directory
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !isDir(filepath.Join(rootAbs, e.Name())) {
			continue
		}
		dir := filepath.Join(rootAbs, e.Name())
		p, err := loadPack(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := seen[p.Pack.Ref]; dup {
			errs = append(errs, fmt.Errorf("%s: pack ref %q is already used by %s", dir, p.Pack.Ref, other))
			continue
		}
		seen[p.Pack.Ref] = dir
		packs = append(packs, p)
	}
	return packs, errors.Join(errs...)
}

// isDir follows symlinks, so a pack may be linked into the packs directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// loadPack loads one pack directory; any problem fails the whole pack, so a
// half-loaded pack never reaches the catalogue.
func loadPack(dir string) (Pack, error) {
	meta, err := readPackFile(dir)
	if err != nil {
		return Pack{}, err
	}
	p := Pack{Pack: store.Pack{Ref: meta.Ref, Description: meta.Description, Path: dir}}

	actionsDir := filepath.Join(dir, "actions")
	entries, err := os.ReadDir(actionsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return Pack{}, fmt.Errorf("%s: %w", actionsDir, err)
	}
	var errs []error
	files := map[string]string{} // action ref -> file
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml") {
			continue // scripts live next to their action files
		}
		file := filepath.Join(actionsDir, e.Name())
		a, err := loadAction(file, meta.Ref, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := files[a.Ref]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate action ref %s (also defined in %s)", file, a.Ref, other))
			continue
		}
		files[a.Ref] = file
		p.Actions = append(p.Actions, a)
	}
	if len(errs) > 0 {
		return Pack{}, errors.Join(errs...)
	}
	return p, nil
}

// readPackFile reads pack.yaml, defaulting the ref to the directory name.
func readPackFile(dir string) (packFile, error) {
	meta := packFile{Ref: filepath.Base(dir)}
	file := filepath.Join(dir, "pack.yaml")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		file = filepath.Join(dir, "pack.yml")
		b, err = os.ReadFile(file)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		file = dir // no pack file: errors below are about the directory name
	case err != nil:
		return packFile{}, err
	default:
		var tree any
		if err := yaml.Unmarshal(b, &tree); err != nil {
			return packFile{}, fmt.Errorf("%s: %w", file, err)
		}
		if tree != nil {
			d := &decoder{}
			if m := d.object(tree, "", "ref", "description"); m != nil {
				if ref := d.str(m, "ref", ""); ref != "" {
					meta.Ref = ref
				}
				meta.Description = d.str(m, "description", "")
			}
			if len(d.errs) > 0 {
				return packFile{}, fmt.Errorf("%s: invalid pack: %s", file, params.JoinFields(d.errs))
			}
		}
	}
	if !ValidName(meta.Ref) {
		return packFile{}, fmt.Errorf("%s: pack ref %q %s (set ref in pack.yaml or rename the directory)", file, meta.Ref, nameRule)
	}
	if meta.Ref == CorePack {
		return packFile{}, fmt.Errorf("%s: pack ref %q is reserved for the built-in pack", file, CorePack)
	}
	return meta, nil
}

// loadAction reads and converts one action file. Errors name the file; a
// *SpecError inside stays reachable with errors.As.
func loadAction(file, pack, packDir string) (store.Action, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return store.Action{}, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return store.Action{}, fmt.Errorf("%s: empty action file", file)
	}
	var tree any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		return store.Action{}, fmt.Errorf("%s: %w", file, err)
	}
	a, err := convertTree(tree, pack, packDir, filepath.Dir(file))
	if err != nil {
		return store.Action{}, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}
