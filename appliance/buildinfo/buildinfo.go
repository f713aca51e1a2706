// Package buildinfo holds the version stamp set at link time with -ldflags -X.
package buildinfo

// Version is the release version, stamped by the Makefile (git describe).
var Version = "0.0.0-dev"

// Commit is the git commit the binary was built from.
var Commit = "unknown"

// Date is the UTC build date in RFC 3339.
var Date = "unknown"
