package web

import (
	"context"
	"encoding/json"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
)

// BrokerNotifications feeds the dashboard from the attune.notifications
// fanout exchange through this node's own exclusive queue (declared on
// every (re)connect, so every node's dashboard sees every change). The
// queue drops its oldest messages beyond its length limit: the dashboard
// needs to know that something changed, not every change.
func BrokerNotifications(conn *broker.Conn) Notifications {
	if conn == nil {
		return nil
	}
	return func(ctx context.Context, fn func(messages.ExecutionChanged)) error {
		return conn.Consume(ctx, broker.ConsumeOptions{
			// An empty name consumes the queue last declared on the
			// channel: the server-named one Declare creates.
			Queue:    "",
			Prefetch: 64,
			Declare: func(ch *amqp.Channel) error {
				_, err := broker.DeclareNotificationQueue(ch)
				return err
			},
		}, func(_ context.Context, d broker.Delivery) error {
			var m messages.ExecutionChanged
			if json.Unmarshal(d.Body, &m) == nil {
				fn(m)
			}
			return nil // best effort: never requeue or dead-letter a notification
		})
	}
}
