package ui

import "time"

// StatProps describe one number on a stat card.
type StatProps struct {
	Label  string
	Value  string
	Tone   string // a StatusTone value, or "" for neutral
	Href   string // optional link target
	TestID string
	Note   string // small text under the value
}

// EmptyProps describe an empty state: what is missing and what to do next.
type EmptyProps struct {
	Title   string
	Hint    string
	Command string // a command line to copy, shown as code
	TestID  string
}

// ButtonProps describe a one-button POST form.
type ButtonProps struct {
	Action  string // form action URL
	CSRF    string
	Label   string
	TestID  string
	Name    string // optional hidden field sent with the button
	Value   string
	Danger  bool
	Confirm string // when set, the browser asks before submitting
}

// PagerProps link to the first and to the next (older) page of a list.
type PagerProps struct {
	FirstURL string // empty on the first page
	NextURL  string // empty on the last page
}

// TimeProps show a time relative to Now, with the exact time as a tooltip.
type TimeProps struct {
	At  time.Time
	Now time.Time
}
