package rabbitnode

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// These tests run a real RabbitMQ (rabbitmq-server must be installed, as `make test`
// ensures). Each start takes a few seconds, so the scenarios are grouped.

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startNode(t *testing.T, dir string) *Node {
	t.Helper()
	if _, err := FindServer(""); err != nil {
		t.Fatalf("these tests need a real RabbitMQ: %v", err)
	}
	t0 := time.Now()
	n, err := Start(context.Background(), Config{Dir: dir, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Logf("start took %v (%s)", time.Since(t0).Round(time.Millisecond), n.URL())
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

func stopNode(t *testing.T, n *Node) {
	t.Helper()
	t0 := time.Now()
	require.NoError(t, n.Stop())
	d := time.Since(t0)
	t.Logf("stop took %v", d.Round(time.Millisecond))
	require.Less(t, d, 16*time.Second)
	require.NoError(t, n.Stop(), "Stop must be idempotent")
	assertNoLeftovers(t, n)
}

// assertNoLeftovers scans /proc for live processes that belong to n: anything
// mentioning its dir or node name, epmd on its port, a VM using its epmd port.
func assertNoLeftovers(t *testing.T, n *Node) {
	t.Helper()
	epmdPort := strconv.Itoa(n.ports.EPMD)
	for _, pid := range allPids() {
		args := cmdline(pid)
		if len(args) == 0 || !alive(pid) {
			continue
		}
		line := strings.Join(args, " ")
		base := filepath.Base(args[0])
		mine := strings.Contains(line, n.dir) || strings.Contains(line, n.name) ||
			(base == "epmd" && hasArgPair(args, "-port", epmdPort)) ||
			(base == "beam.smp" && hasArgPair(args, "-epmd_port", epmdPort))
		require.False(t, mine, "leftover process %d: %s", pid, line)
	}
	for _, p := range []int{n.ports.AMQP, n.ports.Dist, n.ports.EPMD} {
		require.True(t, portFree(p), "port %d still bound", p)
	}
}

// roundTrip declares a queue, publishes a message and gets it back.
func roundTrip(t *testing.T, url, queue string, durable bool) {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, durable, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false,
		amqp.Publishing{Body: []byte("hello " + queue), DeliveryMode: amqp.Persistent}))
	getOne(t, ch, queue, "hello "+queue)
}

func getOne(t *testing.T, ch *amqp.Channel, queue, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		msg, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if ok {
			require.Equal(t, want, string(msg.Body))
		}
		return ok
	}, 5*time.Second, 50*time.Millisecond)
}

func TestStartPublishStop(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	require.True(t, strings.HasPrefix(n.name, "attune-") && strings.HasSuffix(n.name, "@localhost"), n.name)
	for _, p := range []int{n.ports.AMQP, n.ports.Dist, n.ports.EPMD} {
		require.False(t, standardPorts[p], "standard port %d used", p)
	}
	st, err := os.Stat(filepath.Join(dir, "amqp-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	roundTrip(t, n.URL(), "rabbitnode.test", false)

	_, err = Start(context.Background(), Config{Dir: dir})
	require.ErrorContains(t, err, "in use by another running process", "a second owner of the same dir must be refused")

	stopNode(t, n)
}

func TestRestartSameDirKeepsData(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	url, p := n.URL(), n.ports
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("kept", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "kept", false, false,
		amqp.Publishing{Body: []byte("survives"), DeliveryMode: amqp.Persistent}))
	require.NoError(t, conn.Close())
	stopNode(t, n)

	n = startNode(t, dir)
	require.Equal(t, url, n.URL(), "ports and password are remembered in the dir")
	require.Equal(t, p, n.ports)
	conn, err = amqp.Dial(n.URL())
	require.NoError(t, err)
	ch, err = conn.Channel()
	require.NoError(t, err)
	getOne(t, ch, "kept", "survives")
	require.NoError(t, conn.Close())
	stopNode(t, n)

	// Losing the password file while mnesia survives must not lock the appliance out.
	require.NoError(t, os.Remove(filepath.Join(dir, "amqp-password")))
	n = startNode(t, dir)
	require.NotEqual(t, url, n.URL())
	roundTrip(t, n.URL(), "after-repair", false)
	stopNode(t, n)
}

func TestStaleNodeFromCrashedRunIsStopped(t *testing.T) {
	dir := t.TempDir()
	old := startNode(t, dir)
	beam := readPid(filepath.Join(dir, "rabbit.pid"))
	require.True(t, alive(beam))
	// Simulate a crash of the owning process: the flock goes away, the node keeps running.
	require.NoError(t, old.lock.Close())

	n := startNode(t, dir)
	require.False(t, alive(beam), "stale beam.smp %d must be stopped", beam)
	require.Eventually(t, func() bool { return exited(old.serverDone) }, 5*time.Second, 50*time.Millisecond)
	roundTrip(t, n.URL(), "after-crash", false)
	stopNode(t, n)
	old.stopOnce.Do(func() {}) // its processes are gone; avoid a second cleanup
}

func TestStopForceKillsHungNode(t *testing.T) {
	n := startNode(t, t.TempDir())
	beam := readPid(filepath.Join(n.dir, "rabbit.pid"))
	require.True(t, alive(beam))
	require.NoError(t, syscall.Kill(beam, syscall.SIGSTOP)) // a VM that answers nothing
	stopNode(t, n)
	require.False(t, alive(beam))
}

func TestTwoNodesSideBySide(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	nodes := make([]*Node, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range dirs {
		wg.Go(func() {
			nodes[i], errs[i] = Start(context.Background(), Config{Dir: dirs[i], Logger: testLogger(t)})
		})
	}
	wg.Wait()
	for i := range nodes {
		require.NoError(t, errs[i])
		t.Cleanup(func() { _ = nodes[i].Stop() })
	}
	require.NotEqual(t, nodes[0].name, nodes[1].name)
	require.NotEqual(t, nodes[0].ports.AMQP, nodes[1].ports.AMQP)
	for i, n := range nodes {
		roundTrip(t, n.URL(), "side-by-side-"+strconv.Itoa(i), false)
	}
	stopNode(t, nodes[0])
	roundTrip(t, nodes[1].URL(), "still-up", false) // stopping one must not touch the other
	stopNode(t, nodes[1])
}

func TestStartFailureReportsLogTail(t *testing.T) {
	// Occupy the AMQP port so the node fails to boot.
	dir := t.TempDir()
	p, err := choosePorts(filepath.Join(t.TempDir(), "p.json"), ports{})
	require.NoError(t, err)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer syscall.Close(fd)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Port: p.AMQP, Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 1))

	t0 := time.Now()
	n, err := Start(context.Background(), Config{Dir: dir, AMQPPort: p.AMQP, Logger: testLogger(t)})
	t.Logf("failed start took %v", time.Since(t0).Round(time.Millisecond))
	require.Nil(t, n)
	require.Error(t, err)
	require.Contains(t, err.Error(), "eaddrinuse", "the error must carry the server's output")
	require.Empty(t, beamsWithHome(filepath.Join(dir, "home")))
}

func TestFindServerBogusPath(t *testing.T) {
	_, err := FindServer("/nonexistent/rabbitmq-server")
	require.True(t, errors.Is(err, ErrNotInstalled))
	require.ErrorContains(t, err, "apt-get install rabbitmq-server")
	require.ErrorContains(t, err, "--amqp-url")

	_, err = Start(context.Background(), Config{Dir: t.TempDir(), ServerPath: "/nonexistent/rabbitmq-server"})
	require.ErrorIs(t, err, ErrNotInstalled)
}

func TestStandardPortRefused(t *testing.T) {
	if _, err := FindServer(""); err != nil {
		t.Skip(err)
	}
	_, err := Start(context.Background(), Config{Dir: t.TempDir(), AMQPPort: 5672})
	require.ErrorContains(t, err, "not allowed")
}
