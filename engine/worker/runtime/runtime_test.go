package runtime

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeScript writes body to dir/name and returns its absolute path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// requireRuntime skips when the interpreter is missing, as Detect decides.
func requireRuntime(t *testing.T, rt string) {
	t.Helper()
	if !slices.Contains(Detect(), rt) {
		t.Skipf("runtime %q not usable here: its interpreter (%s) is not on PATH", rt, interpreters[rt])
	}
}

func TestDetect(t *testing.T) {
	got := Detect()
	assert.True(t, slices.IsSorted(got), "sorted: %v", got)
	assert.Contains(t, got, Builtin)
	if _, err := os.Stat("/bin/sh"); err == nil {
		assert.Contains(t, got, Shell)
	}
	for rt, bin := range map[string]string{Python: "python3", Node: "node"} {
		_, err := exec.LookPath(bin)
		assert.Equal(t, err == nil, slices.Contains(got, rt), rt)
	}
}

// TestScriptRuntimes runs the same contract through each interpreter:
// parameters on stdin and in the environment, JSON on stdout becomes the result.
func TestScriptRuntimes(t *testing.T) {
	t.Parallel()
	cases := []struct{ rt, file, body string }{
		{Shell, "a.sh", `read -r input
printf '{"stdin":%s,"name":"%s","n":"%s","id":"%s","action":"%s"}\n' "$input" "$ATTUNE_PARAM_NAME" "$ATTUNE_PARAM_COUNT_2" "$ATTUNE_EXECUTION_ID" "$ATTUNE_ACTION"
`},
		{Python, "a.py", `import json, os, sys
p = json.load(sys.stdin)
print(json.dumps({"stdin": p, "name": os.environ["ATTUNE_PARAM_NAME"], "n": os.environ["ATTUNE_PARAM_COUNT_2"],
    "id": os.environ["ATTUNE_EXECUTION_ID"], "action": os.environ["ATTUNE_ACTION"]}))
`},
		{Node, "a.js", `let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  const e = process.env;
  console.log(JSON.stringify({stdin: JSON.parse(d), name: e.ATTUNE_PARAM_NAME, n: e.ATTUNE_PARAM_COUNT_2,
    id: e.ATTUNE_EXECUTION_ID, action: e.ATTUNE_ACTION}));
});
`},
	}
	for _, c := range cases {
		t.Run(c.rt, func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, c.rt)
			dir := t.TempDir()
			out := NewRunner().Run(context.Background(), Request{
				ExecutionID: 42, ActionRef: "pack.act", Runtime: c.rt,
				Entrypoint: writeScript(t, dir, c.file, c.body), WorkDir: dir,
				Parameters: map[string]any{"name": "wörld", "count-2": 7.5, "nested": map[string]any{"a": []any{1.0}}},
			})
			require.Equal(t, Succeeded, out.Status, "error=%q stderr=%q", out.Error, out.Stderr)
			require.NotNil(t, out.ExitCode)
			assert.Equal(t, 0, *out.ExitCode)
			assert.JSONEq(t, `{"stdin":{"name":"wörld","count-2":7.5,"nested":{"a":[1]}},
				"name":"wörld","n":"7.5","id":"42","action":"pack.act"}`, string(out.Result))
			assert.Positive(t, out.Duration)
		})
	}
}

func TestShellTextResultAndStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{
		Runtime: Shell, WorkDir: dir,
		Entrypoint: writeScript(t, dir, "t.sh", "echo '  hello \"you\"  '\necho warning >&2\npwd >&2\n"),
	})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.Equal(t, `"hello \"you\""`, string(out.Result))
	resolved, _ := filepath.EvalSymlinks(dir)
	assert.Equal(t, "warning\n"+resolved+"\n", out.Stderr, "stderr captured; cwd is WorkDir")
	assert.Empty(t, out.Error)
}

func TestRelativeEntrypointAndTempWorkDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeScript(t, dir, "rel.sh", "echo 5\n")
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir, Entrypoint: "rel.sh"})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.Equal(t, "5", string(out.Result))

	// No WorkDir: the script runs in a throwaway directory that is removed.
	out = NewRunner().Run(context.Background(), Request{Runtime: Shell,
		Entrypoint: writeScript(t, dir, "pwd.sh", "pwd\n")})
	require.Equal(t, Succeeded, out.Status, out.Error)
	var tmp string
	require.NoError(t, json.Unmarshal(out.Result, &tmp))
	assert.Contains(t, tmp, "attune-exec-")
	assert.NoDirExists(t, tmp)
}

func TestExitCodeFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir,
		Entrypoint: writeScript(t, dir, "x.sh", "echo '{\"partial\":true}'\necho boom >&2\nexit 3\n")})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, "exit code 3", out.Error)
	require.NotNil(t, out.ExitCode)
	assert.Equal(t, 3, *out.ExitCode)
	assert.Equal(t, "boom\n", out.Stderr)
	assert.JSONEq(t, `{"partial":true}`, string(out.Result), "partial output kept on failure")
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	r := NewRunner()
	dir := t.TempDir()
	out := r.Run(context.Background(), Request{Runtime: Shell, Entrypoint: filepath.Join(dir, "missing.sh")})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "script not found")

	out = r.Run(context.Background(), Request{Runtime: Shell, Entrypoint: dir})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "is a directory")

	out = r.Run(context.Background(), Request{Runtime: Shell, WorkDir: filepath.Join(dir, "nope"),
		Entrypoint: writeScript(t, dir, "ok.sh", "true\n")})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "work dir")

	out = r.Run(context.Background(), Request{Runtime: "cobol", Entrypoint: "/x"})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, `unknown runtime "cobol"`, out.Error)

	out = r.Run(context.Background(), Request{Runtime: Shell, WorkDir: dir, Entrypoint: filepath.Join(dir, "ok.sh"),
		Parameters: map[string]any{"ch": make(chan int)}})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "not JSON-encodable")
}

// Not parallel: it changes PATH for the whole process.
func TestMissingInterpreter(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	assert.Equal(t, []string{Builtin, Shell}, Detect())
	out := NewRunner().Run(context.Background(), Request{Runtime: Python,
		Entrypoint: writeScript(t, dir, "a.py", "print(1)\n")})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, "python runtime unavailable: python3 not found", out.Error)
}

// Not parallel: it sets an environment variable for the whole process.
func TestInheritedAttuneEnvIsHidden(t *testing.T) {
	t.Setenv("ATTUNE_DATABASE_URL", "postgres://secret")
	t.Setenv("SOME_OTHER_VAR", "visible")
	dir := t.TempDir()
	out := NewRunner().Run(context.Background(), Request{Runtime: Shell, WorkDir: dir,
		Parameters: map[string]any{"flag": true, "obj": map[string]any{}, "nothing": nil, "i": 3},
		Entrypoint: writeScript(t, dir, "e.sh", `echo "[$ATTUNE_DATABASE_URL|$SOME_OTHER_VAR|$ATTUNE_PARAM_FLAG|$ATTUNE_PARAM_I|${ATTUNE_PARAM_OBJ-unset}|${ATTUNE_PARAM_NOTHING-unset}|${PATH:+path}]"`)})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.Equal(t, `"[|visible|true|3|unset|unset|path]"`, string(out.Result))
}

func TestResultFromStdout(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		" \n\t":                "",
		"42\n":                 "42",
		"true":                 "true",
		"[1, 2]\n":             "[1,2]",
		"{\n  \"a\": 1\n}\n":   `{"a":1}`,
		"\"quoted\"\n":         `"quoted"`,
		"hello world\n":        `"hello world"`,
		"{\"a\":1}\n{\"b\":2}": `"{\"a\":1}\n{\"b\":2}"`,
	} {
		assert.Equal(t, want, string(resultFromStdout([]byte(in))), "input %q", in)
	}
}

func TestEnvName(t *testing.T) {
	assert.Equal(t, "MY_PARAM_2", envName("my-param.2"))
	assert.Equal(t, "A_B", envName("a_b"))
}

func TestCappedBuffer(t *testing.T) {
	c := newCappedBuffer(5)
	n, err := c.Write([]byte("abc"))
	assert.Equal(t, 3, n)
	assert.NoError(t, err)
	assert.False(t, c.Truncated())
	n, _ = c.Write([]byte("defgh"))
	assert.Equal(t, 5, n, "reports everything written so copying continues")
	_, _ = c.Write([]byte("more"))
	assert.Equal(t, "abcde", string(c.Bytes()))
	assert.True(t, c.Truncated())
}
