package appliance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// cliTimeLayout shows times in the local zone to the millisecond.
const cliTimeLayout = "2006-01-02 15:04:05.000"

// statusText is a status with what explains it: queue position, reason.
func statusText(e store.Execution) string {
	s := e.Status
	if e.QueuePosition != nil {
		s += fmt.Sprintf(" (position %d in its queue)", *e.QueuePosition)
	}
	if e.StatusReason != nil && *e.StatusReason != "" {
		s += ": " + *e.StatusReason
	}
	return s
}

// printExecution prints one execution for people: fields, then result,
// error, output and (when timeline) the status history.
func printExecution(w io.Writer, e store.Execution, timeline bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("Execution", strconv.FormatInt(e.ID, 10))
	row("Action", e.ActionRef)
	row("Status", statusText(e))
	row("Group", e.GroupKey)
	row("Worker", deref(e.Worker))
	if e.Attempt > 1 {
		row("Attempt", strconv.Itoa(e.Attempt))
	}
	row("Parameters", compactJSON(e.Parameters))
	row("Created", fmtTime(&e.CreatedAt))
	row("Admitted", fmtTime(e.AdmittedAt))
	row("Started", fmtTime(e.StartedAt))
	row("Finished", fmtTime(e.FinishedAt))
	row("Duration", fmtDuration(e))
	if e.ExitCode != nil {
		row("Exit code", strconv.Itoa(*e.ExitCode))
	}
	row("Error", deref(e.Error))
	_ = tw.Flush()
	if len(e.Result) > 0 && string(e.Result) != "null" {
		fmt.Fprintf(w, "Result:\n%s\n", indent(prettyJSON(e.Result)))
	}
	printOutput(w, "Stdout", e.Stdout, e.StdoutTruncated)
	printOutput(w, "Stderr", e.Stderr, e.StderrTruncated)
	if timeline && len(e.Timeline) > 0 {
		fmt.Fprintln(w, "Timeline:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, t := range e.Timeline {
			line := "  " + t.At.Local().Format(cliTimeLayout) + "\t" + t.To
			if t.Worker != nil && *t.Worker != "" {
				line += "\ton " + *t.Worker
			} else {
				line += "\t"
			}
			if t.Reason != nil && *t.Reason != "" {
				line += "\t" + *t.Reason
			}
			fmt.Fprintln(tw, line)
		}
		_ = tw.Flush()
	}
}

func printOutput(w io.Writer, name string, text *string, truncated bool) {
	if text == nil || *text == "" {
		return
	}
	label := name + ":"
	if truncated {
		label = name + " (truncated):"
	}
	fmt.Fprintf(w, "%s\n%s\n", label, indent(strings.TrimRight(*text, "\n")))
}

// printExecutionTable prints executions one per line.
func printExecutionTable(w io.Writer, items []store.Execution) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no executions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACTION\tSTATUS\tWORKER\tCREATED\tDURATION")
	for _, e := range items {
		status := e.Status
		if e.QueuePosition != nil {
			status += fmt.Sprintf(" (#%d)", *e.QueuePosition)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.ActionRef, status, orDash(deref(e.Worker)),
			e.CreatedAt.Local().Format(cliTimeLayout), orDash(fmtDuration(e)))
	}
	_ = tw.Flush()
}

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.Local().Format(cliTimeLayout)
}

// fmtDuration is the run time: the worker's measure, else started→finished.
func fmtDuration(e store.Execution) string {
	var d time.Duration
	switch {
	case e.DurationMs != nil:
		d = time.Duration(*e.DurationMs * float64(time.Millisecond))
	case e.StartedAt != nil && e.FinishedAt != nil:
		d = e.FinishedAt.Sub(*e.StartedAt)
	default:
		return ""
	}
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// prettyJSON indents a JSON value; a JSON string is shown as its text.
func prettyJSON(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimRight(s, "\n")
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
