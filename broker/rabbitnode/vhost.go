package rabbitnode

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

var vhostName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// AddVHost creates a virtual host that the node's user may use and returns
// its AMQP URL. Tests use one vhost each so their queues never mix.
func (n *Node) AddVHost(ctx context.Context, name string) (string, error) {
	if !vhostName.MatchString(name) {
		return "", fmt.Errorf("vhost name %q: use letters, digits, '_', '.', '-'", name)
	}
	// One rabbitmqctl eval instead of two rabbitmqctl calls: each call
	// boots an Erlang VM, which costs about a second.
	expr := fmt.Sprintf(`ok = case rabbit_vhost:add(<<"%[1]s">>, <<"%[2]s">>) of ok -> ok; {error, {already_exists, _}} -> ok; O -> O end, `+
		`rabbit_auth_backend_internal:set_permissions(<<"%[2]s">>, <<"%[1]s">>, <<".*">>, <<".*">>, <<".*">>, <<"%[2]s">>).`, name, amqpUser)
	if _, err := n.ctl(ctx, 30*time.Second, "eval", expr); err != nil {
		if _, err := n.ctl(ctx, 30*time.Second, "add_vhost", name); err != nil {
			return "", err
		}
		if _, err := n.ctl(ctx, 30*time.Second, "set_permissions", "-p", name, amqpUser, ".*", ".*", ".*"); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/%s", amqpUser, n.password, n.ports.AMQP, url.PathEscape(name)), nil
}

// DeleteVHost removes a virtual host and everything in it.
func (n *Node) DeleteVHost(ctx context.Context, name string) error {
	_, err := n.ctl(ctx, 30*time.Second, "delete_vhost", name)
	return err
}
