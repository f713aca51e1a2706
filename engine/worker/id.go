package worker

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// validID is what a worker id may contain: it is part of queue names and of
// a topic routing key, where '*' and '#' would be wildcards.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// ValidateID reports whether id can name a worker.
func ValidateID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("worker id %q: use 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// NewID returns a fresh worker id: <hostname>-<random>.
func NewID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, host)
	host = strings.Trim(host, ".-_")
	if host == "" {
		host = "worker"
	}
	if len(host) > 100 {
		host = host[:100]
	}
	return host + "-" + randomSuffix()
}

// LoadOrCreateID returns the worker id stored at path, creating the file
// (mode 0600) with a NewID on first use. A stable id lets a restarted worker
// reuse its durable dispatch queue.
func LoadOrCreateID(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if err := ValidateID(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("worker id file: %w", err)
	}
	id := NewID()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write worker id file: %w", err)
	}
	return id, nil
}
