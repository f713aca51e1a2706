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

// Delivery is one received message.
type Delivery = amqp.Delivery

// Handler processes one delivery. Returning nil acks it; an error wrapped
// with Permanent rejects it without requeue (into the dead-letter queue);
// any other error requeues it, up to ConsumeOptions.MaxAttempts.
type Handler func(ctx context.Context, d Delivery) error

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the message goes to the DLQ.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool { var p permanentError; return errors.As(err, &p) }

// ConsumeOptions configures Consume.
type ConsumeOptions struct {
	Queue       string
	Prefetch    int                       // unacked messages in flight; also the number of handler goroutines
	Declare     func(*amqp.Channel) error // declares what this consumer consumes, on every (re)connect
	MaxAttempts int                       // transient failures before the message is dead-lettered; default 5
	HandlerCtx  context.Context           // context handlers run under; outlives ctx so in-flight work can finish
	Logger      *slog.Logger
	OnReady     func() // called each time the consumer is subscribed (test signal)
}

// Consume subscribes to opts.Queue and runs h for each delivery until ctx is
// cancelled; then it stops taking messages, waits for in-flight handlers and
// returns. It re-subscribes when the channel or connection drops.
func (c *Conn) Consume(ctx context.Context, opts ConsumeOptions, h Handler) error {
	if opts.Prefetch <= 0 {
		opts.Prefetch = 1
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.HandlerCtx == nil {
		opts.HandlerCtx = context.Background()
	}
	log := opts.Logger
	if log == nil {
		log = c.log
	}
	log = log.With("queue", opts.Queue)
	attempts := &attemptCounter{seen: map[string]int{}}
	backoff := 100 * time.Millisecond
	for {
		err := c.consumeOnce(ctx, opts, h, attempts, log)
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return nil
		}
		log.Warn("consumer interrupted; resubscribing", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (c *Conn) consumeOnce(ctx context.Context, opts ConsumeOptions, h Handler, attempts *attemptCounter, log *slog.Logger) error {
	ch, err := c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if opts.Declare != nil {
		if err := opts.Declare(ch); err != nil {
			return err
		}
	}
	if err := ch.Qos(opts.Prefetch, 0, false); err != nil {
		return fmt.Errorf("set prefetch: %w", err)
	}
	tag := fmt.Sprintf("attune-%s-%d", opts.Queue, time.Now().UnixNano())
	deliveries, err := ch.ConsumeWithContext(context.WithoutCancel(ctx), opts.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", opts.Queue, err)
	}
	if opts.OnReady != nil {
		opts.OnReady()
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	work := make(chan amqp.Delivery)
	var wg sync.WaitGroup
	for range opts.Prefetch {
		wg.Go(func() {
			for d := range work {
				handle(opts, h, d, attempts, log)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait() // in-flight handlers finish and ack before the channel closes
	}()
	for {
		select {
		case <-ctx.Done():
			_ = ch.Cancel(tag, false)
			return ctx.Err()
		case e := <-closed:
			if e == nil {
				return errors.New("channel closed")
			}
			return e
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("delivery channel closed")
			}
			work <- d
		}
	}
}

func handle(opts ConsumeOptions, h Handler, d amqp.Delivery, attempts *attemptCounter, log *slog.Logger) {
	err := safeCall(opts.HandlerCtx, h, d)
	if err == nil {
		attempts.forget(d.MessageId)
		_ = d.Ack(false)
		return
	}
	if IsPermanent(err) {
		log.Warn("rejecting message to the dead-letter queue", "type", d.Type, "err", err)
		attempts.forget(d.MessageId)
		_ = d.Nack(false, false)
		return
	}
	n := attempts.inc(d.MessageId)
	if n >= opts.MaxAttempts {
		log.Error("message failed too often; dead-lettering it", "type", d.Type, "attempts", n, "err", err)
		attempts.forget(d.MessageId)
		_ = d.Nack(false, false)
		return
	}
	log.Warn("handler failed; requeueing", "type", d.Type, "attempt", n, "err", err)
	time.Sleep(time.Duration(n) * 50 * time.Millisecond)
	_ = d.Nack(false, true)
}

// safeCall turns a handler panic into a permanent error so one poison message
// cannot crash the process or loop forever.
func safeCall(ctx context.Context, h Handler, d amqp.Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panic: %v", r))
		}
	}()
	return h(ctx, d)
}

// attemptCounter counts transient failures per message id in this process;
// a message without an id is dead-lettered on its first failure, since
// there is no way to tell its redeliveries apart.
type attemptCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

func (a *attemptCounter) inc(id string) int {
	if id == "" {
		return 1 << 20
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen[id]++
	return a.seen[id]
}

func (a *attemptCounter) forget(id string) {
	if id == "" {
		return
	}
	a.mu.Lock()
	delete(a.seen, id)
	a.mu.Unlock()
}
