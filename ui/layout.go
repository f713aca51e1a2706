package ui

import "strings"

// Nav names a top-level page for the navigation bar.
type Nav string

// The dashboard's top-level pages.
const (
	NavOverview    Nav = "overview"
	NavQueues      Nav = "queues"
	NavExecutions  Nav = "executions"
	NavWorkers     Nav = "workers"
	NavDeadLetters Nav = "dead-letters"
)

// Live sections: the SSE stream names which of these changed, and each live
// region of a page lists the sections it shows.
const (
	SectionExecutions  = "executions"
	SectionQueues      = "queues"
	SectionWorkers     = "workers"
	SectionDeadLetters = "dead-letters"
)

// navItem is one entry of the navigation bar.
type navItem struct {
	Nav   Nav
	Href  string
	Label string
}

var navItems = []navItem{
	{NavOverview, "/", "Overview"},
	{NavQueues, "/queues", "Queues"},
	{NavExecutions, "/executions", "Executions"},
	{NavWorkers, "/workers", "Workers"},
	{NavDeadLetters, "/dead-letters", "Dead letters"},
}

// LayoutProps are what every page passes to Layout.
type LayoutProps struct {
	Title string
	Nav   Nav
	// CSRF is the session's form token; empty when logged out, which also
	// hides the navigation and the live feed.
	CSRF string
	// Flash is a one-time message from the previous action, if any.
	Flash *Flash
	// EventsURL is the SSE endpoint the page listens to; empty for none.
	EventsURL string
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	Error bool
	Text  string
}

// RegionProps make an element a live region: it is re-fetched and replaced
// when one of Sections changes.
type RegionProps struct {
	ID       string
	Sections []string
	TestID   string
}

func (r RegionProps) sections() string { return strings.Join(r.Sections, " ") }
