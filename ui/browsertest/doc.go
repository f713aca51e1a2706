// Package browsertest drives the dashboard in a real browser (Debian's
// chromium through chromedp) against a whole appliance started in-process on
// the project's test PostgreSQL and RabbitMQ. It holds tests only; it is a
// package of its own because a test of package web cannot import appliance
// (appliance imports web).
//
// Screenshots of every page are written to $ATTUNE_TEST_ARTIFACTS (or the
// test's temporary directory); with ATTUNE_UPDATE_SCREENSHOTS=1 the ones
// shown in the README are also copied to docs/screenshots.
package browsertest
