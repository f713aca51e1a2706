package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Conn is a RabbitMQ connection that redials when the broker drops it, so
// publishers and consumers survive a broker restart.
type Conn struct {
	url  string
	log  *slog.Logger
	mu   sync.Mutex
	conn *amqp.Connection
	done chan struct{}
	once sync.Once
}

// Dial connects to url and returns a self-healing connection.
func Dial(ctx context.Context, url string, log *slog.Logger) (*Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{url: url, log: log, done: make(chan struct{})}
	if _, err := c.current(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// current returns the live connection, dialling again if it was closed.
func (c *Conn) current(ctx context.Context) (*amqp.Connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return nil, ErrClosed
	default:
	}
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		conn, err := amqp.DialConfig(c.url, amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US", Properties: amqp.Table{"connection_name": "attune"}})
		if err == nil {
			c.conn = conn
			return conn, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("connect to RabbitMQ: %w", lastErr)
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("broker connection closed")

// Channel opens a new channel on the live connection.
func (c *Conn) Channel(ctx context.Context) (*amqp.Channel, error) {
	conn, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		// The connection may have died between the check and the call.
		conn, err2 := c.current(ctx)
		if err2 != nil {
			return nil, err2
		}
		return conn.Channel()
	}
	return ch, nil
}

// Ping reports whether the broker answers (opens and closes a channel).
func (c *Conn) Ping(ctx context.Context) error {
	ch, err := c.Channel(ctx)
	if err != nil {
		return err
	}
	return ch.Close()
}

// Close closes the connection; the Conn cannot be used afterwards.
func (c *Conn) Close() error {
	c.once.Do(func() { close(c.done) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn.Close()
	}
	return nil
}

// Declare runs a topology declaration on a short-lived channel.
func (c *Conn) Declare(ctx context.Context, fn func(*amqp.Channel) error) error {
	ch, err := c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	return fn(ch)
}
