package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnroutable means the broker returned a mandatory message: no queue is
// bound for its routing key (e.g. the worker's queue is gone).
var ErrUnroutable = errors.New("message unroutable: no queue bound for routing key")

// ErrNacked means the broker refused to take responsibility for a message.
var ErrNacked = errors.New("message not confirmed by broker")

// Message is one outgoing message.
type Message struct {
	Type      string // AMQP type property, e.g. "execution.requested"
	Body      []byte // JSON
	Mandatory bool   // come back as ErrUnroutable when no queue is bound
	Transient bool   // not written to disk: for best-effort notifications
	Headers   amqp.Table
}

// Publisher publishes persistent messages and waits for publisher confirms.
type Publisher struct {
	conn *Conn

	mu       sync.Mutex
	ch       *amqp.Channel
	returns  chan amqp.Return
	returned map[string]bool
}

// NewPublisher creates a publisher on conn.
func NewPublisher(conn *Conn) *Publisher {
	return &Publisher{conn: conn, returned: map[string]bool{}}
}

// channel returns the confirm-mode channel, opening one if needed. Callers hold p.mu.
func (p *Publisher) channel(ctx context.Context) (*amqp.Channel, error) {
	if p.ch != nil && !p.ch.IsClosed() {
		return p.ch, nil
	}
	ch, err := p.conn.Channel(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	// Buffered: the connection's reader puts a return here before it
	// processes the matching ack, so a publisher that drains this buffer
	// after its ack sees its own return.
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 4096))
	p.ch = ch
	return ch, nil
}

// drainReturns moves returned message ids into p.returned. Callers hold p.mu.
func (p *Publisher) drainReturns() {
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				return
			}
			p.returned[r.MessageId] = true
		default:
			return
		}
	}
}

// Publish sends msg to exchange with routing key and returns once the broker
// confirmed it (or reports ErrUnroutable / ErrNacked / a connection error).
func (p *Publisher) Publish(ctx context.Context, exchange, key string, msg Message) error {
	id := uuid.NewString()
	pub := amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: deliveryMode(msg.Transient),
		MessageId:    id,
		Type:         msg.Type,
		Timestamp:    time.Now(),
		Body:         msg.Body,
		Headers:      msg.Headers,
	}
	var conf *amqp.DeferredConfirmation
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		p.mu.Lock()
		var ch *amqp.Channel
		ch, err = p.channel(ctx)
		if err == nil {
			conf, err = ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, msg.Mandatory, false, pub)
		}
		if err != nil {
			p.ch = nil
		}
		p.mu.Unlock()
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("publish %s to %s: %w", key, exchange, err)
	}
	acked, err := conf.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("publish %s to %s: waiting for confirm: %w", key, exchange, err)
	}
	if !acked {
		return fmt.Errorf("publish %s to %s: %w", key, exchange, ErrNacked)
	}
	if msg.Mandatory {
		p.mu.Lock()
		p.drainReturns()
		ret := p.returned[id]
		delete(p.returned, id)
		p.mu.Unlock()
		if ret {
			return fmt.Errorf("publish %s to %s: %w", key, exchange, ErrUnroutable)
		}
	}
	return nil
}

// Close closes the publisher's channel.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		return p.ch.Close()
	}
	return nil
}

func deliveryMode(transient bool) uint8 {
	if transient {
		return amqp.Transient
	}
	return amqp.Persistent
}
