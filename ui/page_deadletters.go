package ui

import "time"

// DeadLettersPage is the model of /dead-letters.
type DeadLettersPage struct {
	Layout  LayoutProps
	Now     time.Time
	Letters []DeadLetterRow
	Pager   PagerProps
	// Unavailable explains why the list cannot be shown (no dead-letter
	// store in this process); empty normally.
	Unavailable string
}

// DeadLetterRow is one dead-lettered message.
type DeadLetterRow struct {
	ID          int64
	Reason      string
	Queue       string
	RoutingKey  string
	MessageType string
	DeathCount  int64
	ExecutionID *int64
	CreatedAt   time.Time
	// Payload is the message body, pretty-printed when it is JSON.
	Payload           string
	Headers           string
	ReplayedAt        *time.Time
	ReplayExecutionID *int64
}
