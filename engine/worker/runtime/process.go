package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pipeDrainTimeout bounds how long we wait for the output pipes to reach EOF
// after the process group has been killed. Only a descendant that escaped the
// group (setsid) can hold them open that long; we then stop reading rather
// than let it pin the execution forever.
const pipeDrainTimeout = 2 * time.Second

// runCommand runs argv as an execution: parameters as JSON on stdin, ATTUNE_*
// environment, its own process group, capped capture, and interruption by ctx.
func runCommand(ctx context.Context, req Request, argv []string) Outcome {
	input, err := json.Marshal(paramsOrEmpty(req.Parameters))
	if err != nil {
		return failed(fmt.Sprintf("parameters are not JSON-encodable: %v", err))
	}
	env := buildEnv(req)
	dir := req.WorkDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "attune-exec-")
		if err != nil {
			return failed(fmt.Sprintf("creating temporary work dir: %v", err))
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return failed(fmt.Sprintf("work dir %s is not a directory", dir))
	}

	pr := startAndWait(ctx, argv, dir, env, input, req)
	if pr.startErr != nil {
		return failed(fmt.Sprintf("starting %s: %v", argv[0], pr.startErr))
	}
	out := Outcome{
		Stdout:          string(pr.stdout.Bytes()),
		Stderr:          string(pr.stderr.Bytes()),
		StdoutTruncated: pr.stdout.Truncated(),
		StderrTruncated: pr.stderr.Truncated(),
		Result:          resultFromStdout(pr.stdout.Bytes()),
	}
	var ws syscall.WaitStatus
	if pr.state != nil {
		ws, _ = pr.state.Sys().(syscall.WaitStatus)
	}
	if pr.state != nil && ws.Exited() {
		code := ws.ExitStatus()
		out.ExitCode = &code
	}
	switch {
	case pr.interrupted:
		o := interrupted(ctx, req)
		out.Status, out.Error = o.Status, o.Error
	case ws.Signaled():
		out.Status = Failed
		out.Error = fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case out.ExitCode != nil && *out.ExitCode != 0:
		out.Status = Failed
		out.Error = fmt.Sprintf("exit code %d", *out.ExitCode)
	default:
		out.Status = Succeeded
	}
	return out
}

// procResult is what startAndWait observed.
type procResult struct {
	startErr       error
	state          *os.ProcessState
	stdout, stderr *cappedBuffer
	// interrupted is set when ctx ended before the process did, i.e. we
	// signalled it; the outcome is then Cancelled/TimedOut whatever it exited with.
	interrupted bool
}

// startAndWait starts argv in a new process group and waits for it. We manage
// the pipes ourselves (rather than letting os/exec copy into buffers) so that
// the capture goroutines can be abandoned if an escaped descendant keeps the
// write ends open, and so that stdin never blocks a run on an unread pipe.
func startAndWait(ctx context.Context, argv []string, dir string, env []string, input []byte, req Request) procResult {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return procResult{startErr: err}
	}
	defer closeAll()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// A process group of its own lets us signal the whole tree the action
	// spawns, not just the interpreter.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startErr := cmd.Start()
	// The child holds its own copies; ours must go so EOF can be seen.
	inR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		return procResult{startErr: startErr}
	}
	pgid := cmd.Process.Pid

	go func() {
		// Errors (EPIPE when the script ignores stdin) are irrelevant: input
		// is an offer, not an obligation.
		_, _ = inW.Write(input)
		inW.Close()
	}()

	res := procResult{stdout: newCappedBuffer(req.OutputLimit), stderr: newCappedBuffer(req.OutputLimit)}
	var readers sync.WaitGroup
	for _, p := range []struct {
		r   *os.File
		buf *cappedBuffer
	}{{outR, res.stdout}, {errR, res.stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			_, _ = io.Copy(p.buf, p.r)
		}()
	}

	waitDone := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(waitDone)
	}()

	select {
	case <-waitDone:
	case <-ctx.Done():
		res.interrupted = true
		signalGroup(pgid, syscall.SIGTERM)
		grace := time.NewTimer(req.KillGrace)
		select {
		case <-waitDone:
			grace.Stop()
		case <-grace.C:
			signalGroup(pgid, syscall.SIGKILL)
			<-waitDone
		}
	}
	// An execution owns its process group: whatever the leader left running
	// (background jobs, TERM-ignoring children) is killed now, so executions
	// never leak processes or keep our capture pipes open.
	signalGroup(pgid, syscall.SIGKILL)
	inW.Close()

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(pipeDrainTimeout):
		outR.Close() // unblocks the readers
		errR.Close()
		<-drained
	}
	res.state = cmd.ProcessState
	return res
}

// signalGroup sends sig to every process in the group. ESRCH (group already
// empty) is the expected, harmless case.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// paramsOrEmpty makes nil parameters encode as {} so scripts can always parse
// stdin as an object.
func paramsOrEmpty(p map[string]any) map[string]any {
	if p == nil {
		return map[string]any{}
	}
	return p
}

// maxEnvValue bounds a parameter passed in the environment. Linux refuses to
// exec with any single variable over 128 KiB and the whole environment shares
// one limit, so large values are left to stdin, which always has everything.
const maxEnvValue = 32 << 10

// buildEnv returns the child's environment: ours minus any inherited ATTUNE_*
// variables (the worker's own configuration, which may hold secrets such as a
// database URL, is none of the action's business), plus ATTUNE_EXECUTION_ID,
// ATTUNE_ACTION and ATTUNE_PARAM_<NAME> for each top-level scalar parameter
// that fits in an environment variable (no NUL byte, at most maxEnvValue).
func buildEnv(req Request) []string {
	env := make([]string, 0, len(os.Environ())+len(req.Parameters)+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ATTUNE_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"ATTUNE_EXECUTION_ID="+strconv.FormatInt(req.ExecutionID, 10),
		"ATTUNE_ACTION="+req.ActionRef,
	)
	names := make([]string, 0, len(req.Parameters))
	for name := range req.Parameters {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic when two names map to the same variable
	for _, name := range names {
		val, ok := scalarString(req.Parameters[name])
		key := envName(name)
		if !ok || key == "" || len(val) > maxEnvValue || strings.ContainsRune(val, 0) {
			continue
		}
		env = append(env, "ATTUNE_PARAM_"+key+"="+val)
	}
	return env
}

// envName upper-cases a parameter name and replaces anything that is not a
// letter, digit or underscore, so any name yields a usable variable name.
func envName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		default:
			return '_'
		}
	}, name)
}

// scalarString renders strings, booleans and numbers for the environment;
// objects, arrays and null are only available on stdin.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		b, err := json.Marshal(x) // JSON formatting: 3 not 3.000000, no exponent for small floats
		if err != nil {
			return "", false // NaN/Inf
		}
		return string(b), true
	default:
		return "", false
	}
}
