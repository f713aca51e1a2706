package packs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/attune-io/attune/engine/store"
)

// writeFiles creates files (path relative to root -> content).
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestLoadDirLoadsPacks(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"mypack/pack.yaml": "ref: mypack\ndescription: Things we run\n",
		"mypack/actions/hello.yaml": `
ref: hello
description: Says hello
runtime: shell
entrypoint: hello.sh
timeout: 30s
parameters:
  type: object
  properties:
    name: {type: string, default: world}
    db: {type: string}
  required: [db]
policy:
  concurrency: {limit: 2, group_by: [db]}
  max_queue_length: 50
  queue_timeout: 10m
  rate_limit: {max: 5, window: 1s}
retry:
  max_retries: 3
  retry_on: [worker_lost, timeout]
`,
		"mypack/actions/hello.sh":   "echo hello\n",
		"mypack/actions/report.yml": "ref: mypack.report\nruntime: python\nentrypoint: ../scripts/report.py\ntimeout: 1.5\n",
		"mypack/scripts/report.py":  "print('{}')\n",
		"mypack/actions/ping.yaml":  "ref: ping\nruntime: builtin\nentrypoint: echo\n",
		"mypack/actions/README.md":  "not an action\n",
		"dirname/actions/x.yaml":    "ref: x\nruntime: node\nentrypoint: x.js\n",
		"dirname/actions/x.js":      "console.log(1)\n",
		".git/actions/broken.yaml":  "this: is: not: loaded\n",
		"not-a-pack.txt":            "ignored\n",
	})

	packs, err := LoadDir(root)
	require.NoError(t, err)
	require.Len(t, packs, 2)

	other, mine := packs[0], packs[1]
	assert.Equal(t, store.Pack{Ref: "dirname", Path: filepath.Join(root, "dirname")}, other.Pack, "ref defaults to the directory name")
	require.Len(t, other.Actions, 1)
	assert.Equal(t, "dirname.x", other.Actions[0].Ref)
	assert.Equal(t, filepath.Join(root, "dirname/actions/x.js"), other.Actions[0].Entrypoint)

	assert.Equal(t, store.Pack{Ref: "mypack", Description: "Things we run", Path: filepath.Join(root, "mypack")}, mine.Pack)
	byRef := map[string]store.Action{}
	for _, a := range mine.Actions {
		byRef[a.Ref] = a
	}
	require.Len(t, byRef, 3)

	hello := byRef["mypack.hello"]
	assert.Equal(t, "mypack", hello.Pack)
	assert.Equal(t, "hello", hello.Name)
	assert.Equal(t, "shell", hello.Runtime)
	assert.Equal(t, filepath.Join(root, "mypack/actions/hello.sh"), hello.Entrypoint, "relative to the action file")
	assert.Equal(t, filepath.Join(root, "mypack"), hello.PackPath)
	assert.Equal(t, 30.0, hello.TimeoutSeconds)
	assert.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string","default":"world"},"db":{"type":"string"}},"required":["db"]}`,
		string(hello.Parameters))
	two, fifty, tenMin := 2, 50, 600
	assert.Equal(t, store.Policy{
		Concurrency:    store.Concurrency{Limit: &two, GroupBy: []string{"db"}, OnLimit: "enqueue"},
		MaxQueueLength: &fifty, QueueTimeout: &tenMin,
		RateLimit: &store.RateLimit{Max: 5, Window: 1},
	}, hello.Policy)
	assert.JSONEq(t, `{"max_retries":3,"backoff":{"initial":1,"max":60,"multiplier":2},"retry_on":["worker_lost","timeout"]}`,
		string(hello.Retry), "backoff defaults filled in")

	report := byRef["mypack.report"]
	assert.Equal(t, filepath.Join(root, "mypack/scripts/report.py"), report.Entrypoint)
	assert.Equal(t, 1.5, report.TimeoutSeconds)
	assert.JSONEq(t, `{}`, string(report.Parameters))
	assert.Nil(t, report.Retry)

	ping := byRef["mypack.ping"]
	assert.Equal(t, "echo", ping.Entrypoint)
	assert.Contains(t, string(ping.Parameters), `"message"`, "a builtin without parameters inherits the builtin's schema")
	assert.NotEmpty(t, ping.Description)
}

func TestLoadDirMissingRootIsEmpty(t *testing.T) {
	packs, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
	assert.NoError(t, err)
	assert.Empty(t, packs)
}

func TestLoadDirReportsBrokenFilesByNameAndField(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"good/actions/a.yaml":  "ref: a\nruntime: builtin\nentrypoint: noop\n",
		"bad/actions/a.yaml":   "ref: a\nruntime: ruby\ntimout: 5\n",
		"bad/actions/b.yaml":   "ref: b\nruntime: shell\nentrypoint: b.sh\n",
		"bad/actions/c.yaml":   "ref: [oops\n",
		"dup/actions/one.yaml": "ref: same\nruntime: builtin\nentrypoint: noop\n",
		"dup/actions/two.yaml": "ref: dup.same\nruntime: builtin\nentrypoint: echo\n",
	})
	packs, err := LoadDir(root)
	require.Error(t, err)
	msg := err.Error()
	a := filepath.Join(root, "bad/actions/a.yaml")
	assert.Contains(t, msg, a+": invalid action: timout: unknown field (allowed: ref, description, runtime, entrypoint, parameters, timeout, policy, retry); runtime: must be one of builtin, shell, python, node")
	assert.Contains(t, msg, filepath.Join(root, "bad/actions/b.yaml")+": invalid action: entrypoint: file actions/b.sh not found in pack bad")
	assert.Contains(t, msg, filepath.Join(root, "bad/actions/c.yaml")+": yaml: ")
	assert.Contains(t, msg, filepath.Join(root, "dup/actions/two.yaml")+": duplicate action ref dup.same (also defined in "+filepath.Join(root, "dup/actions/one.yaml")+")")

	var se *SpecError
	require.True(t, errors.As(err, &se), "the field list stays reachable")
	require.Len(t, packs, 1, "intact packs are still returned so a caller may carry on")
	assert.Equal(t, "good", packs[0].Pack.Ref)
}

func TestLoadDirPackRefRules(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"bad dir name":   {map[string]string{"My Pack/actions/a.yaml": "ref: a\nruntime: builtin\nentrypoint: noop\n"}, `pack ref "My Pack" must be 1-100 lowercase letters`},
		"bad ref":        {map[string]string{"p/pack.yaml": "ref: P.x\n"}, `pack ref "P.x" must be`},
		"unknown field":  {map[string]string{"p/pack.yaml": "ref: p\nversion: 2\n"}, "invalid pack: version: unknown field"},
		"core reserved":  {map[string]string{"p/pack.yaml": "ref: core\n"}, `pack ref "core" is reserved`},
		"duplicate pack": {map[string]string{"a/pack.yaml": "ref: same\n", "b/pack.yaml": "ref: same\n"}, `pack ref "same" is already used by`},
		"prefix mismatch": {map[string]string{"p/actions/a.yaml": "ref: other.a\nruntime: builtin\nentrypoint: noop\n"},
			`ref: pack prefix "other" does not match pack "p"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, c.files)
			_, err := LoadDir(root)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestEntrypointMustStayInsidePack(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"p/actions/in.sh": "true\n",
		"secret.sh":       "true\n",
	})
	packDir := filepath.Join(root, "p")
	require.NoError(t, os.Symlink(filepath.Join(root, "secret.sh"), filepath.Join(packDir, "actions/link.sh")))
	base := filepath.Join(packDir, "actions")

	cases := map[string]string{
		"../../secret.sh":                "entrypoint: ../../secret.sh is outside pack p",
		filepath.Join(root, "secret.sh"): "is outside pack p",
		"link.sh":                        "entrypoint: link.sh is a symlink to " + filepath.Join(root, "secret.sh") + ", outside pack p",
		".":                              "entrypoint: file actions in pack p is a directory, not a script",
	}
	for entry, want := range cases {
		_, err := ActionSpec{Ref: "p.x", Runtime: "shell", Entrypoint: entry}.ToAction("p", packDir, base)
		require.Error(t, err, entry)
		assert.Contains(t, err.Error(), want, entry)
	}
	a, err := ActionSpec{Ref: "x", Runtime: "shell", Entrypoint: filepath.Join(base, "in.sh")}.ToAction("p", packDir, base)
	require.NoError(t, err, "an absolute path inside the pack is fine")
	assert.Equal(t, filepath.Join(base, "in.sh"), a.Entrypoint)
}

func TestActionRoundTripsThroughJSONAndYAML(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"p/actions/run.sh": "true\n"})
	limit := 3
	qt := Seconds(90)
	spec := ActionSpec{
		Ref: "p.run", Runtime: "shell", Entrypoint: "run.sh", Timeout: 2.5,
		Parameters: json.RawMessage(`{"properties":{"x":{"type":"integer"}}}`),
		Policy:     PolicySpec{Concurrency: &ConcurrencySpec{Limit: &limit, OnLimit: "cancel"}, QueueTimeout: &qt},
		Retry:      &RetrySpec{MaxRetries: 1, RetryOn: []string{"failed"}},
	}
	want, err := spec.ToAction("p", filepath.Join(root, "p"), filepath.Join(root, "p/actions"))
	require.NoError(t, err)

	back := ActionToSpec(want)
	b, err := json.Marshal(back)
	require.NoError(t, err)
	var fromJSON ActionSpec
	require.NoError(t, json.Unmarshal(b, &fromJSON))
	got, err := fromJSON.ToAction("", filepath.Join(root, "p"), "")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	y, err := yaml.Marshal(back)
	require.NoError(t, err)
	var fromYAML ActionSpec
	require.NoError(t, yaml.Unmarshal(y, &fromYAML))
	got, err = fromYAML.ToAction("p", filepath.Join(root, "p"), "")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
