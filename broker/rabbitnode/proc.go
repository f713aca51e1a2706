package rabbitnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process and port helpers. They read /proc directly because the processes we
// must clean up (a crashed run's beam.smp, erl_child_setup) are not our children,
// and because PID 1 in containers often never reaps orphans: a zombie still
// answers kill(pid, 0), so "alive" must look at the process state instead.

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may contain spaces and parens
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// ppidOf returns the parent pid of pid, or 0.
func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// cmdline returns the argv of pid (nil for zombies and vanished processes).
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// allPids lists the numeric entries of /proc.
func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// descendants returns all live processes below root. erl_child_setup calls
// setsid, so it escapes the server's process group and must be found by parentage.
func descendants(root int) []int {
	children := map[int][]int{}
	for _, p := range allPids() {
		children[ppidOf(p)] = append(children[ppidOf(p)], p)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// hasArgPair reports whether args contains key immediately followed by val.
func hasArgPair(args []string, key, val string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == key && args[i+1] == val {
			return true
		}
	}
	return false
}

// beamsWithHome finds Erlang VMs started with our private HOME: the server of a
// crashed run, or a rabbitmqctl it left behind. Matching on HOME (not the pid file)
// also catches a node that died before it wrote its pid file.
func beamsWithHome(home string) []int {
	var out []int
	for _, p := range allPids() {
		args := cmdline(p)
		if len(args) > 0 && filepath.Base(args[0]) == "beam.smp" && hasArgPair(args, "-home", home) && alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// killAndWait sends sig to each pid, then polls until all are gone or d passes.
// It returns the pids still alive.
func killAndWait(pids []int, sig syscall.Signal, d time.Duration) []int {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// terminate stops pids gracefully (SIGTERM makes the Erlang VM run init:stop),
// escalating to SIGKILL after grace.
func terminate(pids []int, grace time.Duration) {
	if left := killAndWait(pids, syscall.SIGTERM, grace); len(left) > 0 {
		killAndWait(left, syscall.SIGKILL, 2*time.Second)
	}
}

// readPid reads a pid file; 0 if missing or garbled.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return p
}

// ports is what we remember in Dir so that a restarted appliance keeps the same
// AMQP URL (clients and bookmarks keep working) unless a port was taken meanwhile.
type ports struct {
	AMQP int `json:"amqp"`
	Dist int `json:"dist"`
	EPMD int `json:"epmd"`
}

// standardPorts belong to a system-wide RabbitMQ/Erlang; a private node must
// never take them, or it would block (or be confused with) the real service.
var standardPorts = map[int]bool{5672: true, 25672: true, 4369: true, 35672: true}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// choosePorts applies the rule: explicit port > remembered free port > new free port.
func choosePorts(file string, want ports) (ports, error) {
	var old ports
	if b, err := os.ReadFile(file); err == nil {
		_ = json.Unmarshal(b, &old)
	}
	wants := []*int{&want.AMQP, &want.Dist, &want.EPMD}
	olds := []int{old.AMQP, old.Dist, old.EPMD}
	used := map[int]bool{}
	var holds []net.Listener // keep picked ports bound until all three are chosen, so they differ
	defer func() {
		for _, l := range holds {
			_ = l.Close()
		}
	}()
	for i, w := range wants {
		switch {
		case *w != 0:
			if standardPorts[*w] || *w < 0 || *w > 65535 {
				return ports{}, fmt.Errorf("rabbitnode: port %d not allowed for a private node (standard RabbitMQ/Erlang port or out of range)", *w)
			}
		case olds[i] > 0 && !standardPorts[olds[i]] && !used[olds[i]] && portFree(olds[i]):
			*w = olds[i]
		default:
			for *w == 0 {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return ports{}, fmt.Errorf("rabbitnode: pick a free port: %w", err)
				}
				holds = append(holds, l)
				if p := l.Addr().(*net.TCPAddr).Port; !standardPorts[p] && !used[p] {
					*w = p
				}
			}
		}
		if used[*w] {
			return ports{}, fmt.Errorf("rabbitnode: port %d configured twice", *w)
		}
		used[*w] = true
	}
	b, _ := json.Marshal(want)
	return want, os.WriteFile(file, append(b, '\n'), 0o600)
}

// epmdHasNode asks epmd (NAMES_REQ) whether short is registered. Cheaper and
// quieter than running rabbitmqctl in a loop while the VM boots.
func epmdHasNode(port int, short string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{0, 1, 'n'}); err != nil {
		return false
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.EOF) || len(b) < 4 {
		return false
	}
	return strings.Contains(string(b[4:]), "name "+short+" at port ")
}

// tail returns roughly the last n lines of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 8 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
