package rabbitnode

// Running the node: child processes, readiness, rabbitmqctl, and Stop.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// spawn starts a long-running child in its own process group (so Stop can signal
// the whole group and a Ctrl-C on the appliance's terminal is not delivered to it
// directly) with output appended to a log file; done closes when it exits.
func (n *Node) spawn(logName string, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	logPath := n.path("log", logName)
	_ = os.Rename(logPath, logPath+".1") // keep the previous run's output for post-mortems
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("rabbitnode: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = n.dir, n.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("rabbitnode: start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return cmd, done, nil
}

func (n *Node) startEpmd() (err error) {
	n.epmd, n.epmdDone, err = n.spawn("epmd.log", n.epmdPath, "-port", strconv.Itoa(n.ports.EPMD), "-address", "127.0.0.1")
	if err != nil {
		return err
	}
	_ = os.WriteFile(n.path("epmd.pid"), []byte(strconv.Itoa(n.epmd.Process.Pid)+"\n"), 0o600)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if exited(n.epmdDone) {
			break
		}
		if !portFree(n.ports.EPMD) {
			return nil
		}
	}
	return fmt.Errorf("rabbitnode: epmd did not start on port %d:\n%s", n.ports.EPMD, tail(n.path("log", "epmd.log"), 10))
}

func (n *Node) startServer(serverPath string) (err error) {
	n.server, n.serverDone, err = n.spawn("server.out", serverPath)
	return err
}

func exited(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitReady waits for epmd registration, then await_startup, then a real AMQP login.
// A boot failure makes rabbit print "init terminating in do_boot" and then spend many
// seconds writing a crash dump (exiting 0!), so we watch the output rather than the exit.
func (n *Node) waitReady(ctx context.Context) error {
	out := n.path("log", "server.out")
	fail := func(why string) error {
		return fmt.Errorf("rabbitnode: RabbitMQ node %s %s; see %s and %s; last output:\n%s",
			n.name, why, out, n.path("log", n.name+".log"), tail(out, 25))
	}
	short, _, _ := strings.Cut(n.name, "@")
	registered, started, repaired := false, false, false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		switch {
		case exited(n.serverDone):
			return fail("exited during startup")
		case strings.Contains(tail(out, 40), "init terminating in do_boot"):
			return fail("failed to boot")
		case !registered:
			if registered = epmdHasNode(n.ports.EPMD, short); registered {
				n.log.Debug("node registered with epmd")
			}
		case !started:
			secs := 5
			if dl, ok := ctx.Deadline(); ok {
				secs = max(1, int(time.Until(dl).Seconds()))
			}
			_, err := n.ctl(ctx, time.Duration(secs+5)*time.Second, "await_startup", "--timeout", strconv.Itoa(secs))
			started = err == nil
			n.log.Debug("await_startup", "ok", started, "err", err)
		default:
			conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
			if err == nil {
				_ = conn.Close()
				return nil
			}
			if errors.Is(err, amqp.ErrCredentials) && !repaired {
				repaired = true
				if err := n.repairUser(ctx); err != nil {
					return fmt.Errorf("rabbitnode: reset password of user %s: %w", amqpUser, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fail("not ready: " + context.Cause(ctx).Error())
		case <-tick.C:
		}
	}
}

// repairUser makes the AMQP user match Dir/amqp-password again, e.g. after the
// password file was deleted while mnesia (which holds the user) was kept.
func (n *Node) repairUser(ctx context.Context) error {
	n.log.Warn("AMQP login refused; resetting the password of the private node's user", "user", amqpUser)
	if _, err := n.ctl(ctx, 20*time.Second, "change_password", amqpUser, n.password); err != nil {
		if _, err := n.ctl(ctx, 20*time.Second, "add_user", amqpUser, n.password); err != nil {
			return err
		}
	}
	if _, err := n.ctl(ctx, 20*time.Second, "set_user_tags", amqpUser, "administrator"); err != nil {
		return err
	}
	_, err := n.ctl(ctx, 20*time.Second, "set_permissions", "-p", "/", amqpUser, ".*", ".*", ".*")
	return err
}

// ctl runs rabbitmqctl against this node with the private environment; on timeout
// the whole process group is killed (rabbitmqctl is sh → erl → beam.smp).
func (n *Node) ctl(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.ctlPath, append([]string{"-n", n.name}, args...)...)
	cmd.Dir, cmd.Env = n.dir, n.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Stop stops the node: `rabbitmqctl stop <pidfile>`, then SIGTERM/SIGKILL of its
// process group and of erl_child_setup (which escapes the group), then epmd
// (`epmd -port P -kill`, then a signal). It finishes within ~15s, is idempotent,
// and releases Dir for the next Start. An error means something refused to die.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	t0 := time.Now()
	var left []int
	if n.server != nil {
		// Our child is the rabbitmq-server sh script; it runs beam.smp as a background
		// child (same process group) and forwards SIGTERM to it.
		pid := n.server.Process.Pid
		kids := descendants(pid)
		if !exited(n.serverDone) {
			args := []string{"stop"}
			if beam := readPid(n.path("rabbit.pid")); alive(beam) && slices.Contains(kids, beam) {
				args = append(args, n.path("rabbit.pid")) // makes rabbitmqctl wait for the VM to exit
			}
			if _, err := n.ctl(context.Background(), 6*time.Second, args...); err != nil {
				n.log.Warn("graceful stop failed; signalling", "err", err)
			}
		}
		if !waitDone(n.serverDone, time.Second) {
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			if !waitDone(n.serverDone, 2*time.Second) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				waitDone(n.serverDone, time.Second)
			}
		}
		left = append(left, killAndWait(kids, syscall.SIGKILL, time.Second)...)
		if alive(pid) {
			left = append(left, pid)
		}
	}
	if n.epmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = exec.CommandContext(ctx, n.epmdPath, "-port", strconv.Itoa(n.ports.EPMD), "-kill").Run()
		cancel()
		if !waitDone(n.epmdDone, 500*time.Millisecond) {
			_ = syscall.Kill(-n.epmd.Process.Pid, syscall.SIGKILL)
			if !waitDone(n.epmdDone, time.Second) {
				left = append(left, n.epmd.Process.Pid)
			}
		}
	}
	_ = os.Remove(n.path("rabbit.pid"))
	_ = os.Remove(n.path("epmd.pid"))
	if n.lock != nil {
		_ = n.lock.Close() // releases the flock
	}
	if len(left) > 0 {
		return fmt.Errorf("rabbitnode: processes of node %s survived SIGKILL: %v", n.name, left)
	}
	n.log.Info("private RabbitMQ stopped", "elapsed", time.Since(t0).Round(time.Millisecond))
	return nil
}

func waitDone(done chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
