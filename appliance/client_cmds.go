package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/attune-io/attune/engine/store"
)

// clientCommands are the commands that talk to a running appliance.
func clientCommands() []*cobra.Command {
	return []*cobra.Command{newRunCommand(), newExecutionsCommand()}
}

func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run ACTION [key=value ...]",
		Short: "Run an action (values are JSON when they parse: n=3 is a number, msg=hi a string)",
		Long: `Request an execution of ACTION with parameters given as key=value.

A value that parses as JSON is sent as JSON (seconds=0.5, force=true,
tags='["a","b"]', opts='{"x":1}'); anything else is a string (message=hi).
Quote a JSON string to force a string: code='"007"'.

With --wait, attune follows the execution until it ends, prints its result
(and stdout/stderr) and exits non-zero unless it succeeded.`,
		Args: cobra.MinimumNArgs(1),
		RunE: runRun,
	}
	addClientFlags(cmd.Flags())
	cmd.Flags().Bool("wait", false, "wait for the execution to finish and print its result")
	cmd.Flags().Float64("timeout", 0, "execution timeout in seconds (default: the action's)")
	return cmd
}

func runRun(cmd *cobra.Command, args []string) error {
	params, err := parseParams(args[1:])
	if err != nil {
		return err
	}
	c, err := clientFromFlags(cmd.Flags())
	if err != nil {
		return err
	}
	req := RunRequest{ActionRef: args[0], Parameters: params}
	if cmd.Flags().Changed("timeout") {
		t, _ := cmd.Flags().GetFloat64("timeout")
		req.Timeout = &t
	}
	asJSON, _ := cmd.Flags().GetBool("json")
	wait, _ := cmd.Flags().GetBool("wait")
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	e, raw, err := c.RequestExecution(cmd.Context(), req)
	if err != nil {
		return err
	}
	if !wait {
		if asJSON {
			return printRaw(out, raw)
		}
		printExecution(out, e, false)
		return nil
	}
	var onChange func(store.Execution)
	if !asJSON {
		onChange = func(x store.Execution) { fmt.Fprintf(errOut, "execution %d: %s\n", x.ID, statusText(x)) }
	}
	final, raw, err := c.WaitExecution(cmd.Context(), e.ID, 30*time.Second, onChange)
	if err != nil {
		return fmt.Errorf("waiting for execution %d: %w", e.ID, err)
	}
	if asJSON {
		if err := printRaw(out, raw); err != nil {
			return err
		}
	} else {
		printExecution(out, final, false)
	}
	return finalError(final)
}

// finalError is nil for a succeeded execution and otherwise says how it
// ended, so the process exits non-zero.
func finalError(e store.Execution) error {
	if e.Status == store.StatusSucceeded {
		return nil
	}
	msg := fmt.Sprintf("execution %d %s", e.ID, e.Status)
	if e.Error != nil && *e.Error != "" {
		msg += ": " + *e.Error
	} else if e.StatusReason != nil && *e.StatusReason != "" {
		msg += ": " + *e.StatusReason
	}
	return fmt.Errorf("%s", msg)
}

// parseParams turns key=value arguments into parameters. A value that is
// valid JSON is decoded (numbers keep their exact text), anything else is
// a string.
func parseParams(args []string) (map[string]any, error) {
	out := make(map[string]any, len(args))
	for _, a := range args {
		key, val, ok := strings.Cut(a, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("parameter %q: want key=value", a)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("parameter %q given twice", key)
		}
		out[key] = parseValue(val)
	}
	return out, nil
}

// parseValue decodes val as one JSON value, or returns it as a string.
func parseValue(val string) any {
	dec := json.NewDecoder(strings.NewReader(val))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return val
	}
	if _, err := dec.Token(); err != io.EOF {
		return val // trailing text: "1 2", "3abc"
	}
	return v
}

func newExecutionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "executions",
		Aliases: []string{"execution", "exec"},
		Short:   "List, show and cancel executions",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List executions, newest first",
		Args:  cobra.NoArgs,
		RunE:  runExecutionsList,
	}
	addClientFlags(list.Flags())
	list.Flags().StringSlice("status", nil, "only these statuses (comma list or repeated), e.g. running,queued")
	list.Flags().String("action", "", "only executions of this action ref")
	list.Flags().Int("limit", 20, "how many to show (1-1000)")
	list.Flags().Int64("before", 0, "show executions with an id below this (the next-page cursor)")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show one execution: status, result, output and timeline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExecutionByID(cmd, args[0], (*Client).GetExecution, true)
		},
	}
	addClientFlags(get.Flags())

	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel an execution (at once if it has not started; a running one is stopped)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExecutionByID(cmd, args[0], (*Client).CancelExecution, false)
		},
	}
	addClientFlags(cancel.Flags())
	cmd.AddCommand(list, get, cancel)
	return cmd
}

func runExecutionsList(cmd *cobra.Command, _ []string) error {
	c, err := clientFromFlags(cmd.Flags())
	if err != nil {
		return err
	}
	var q ExecutionQuery
	q.Statuses, _ = cmd.Flags().GetStringSlice("status")
	q.ActionRef, _ = cmd.Flags().GetString("action")
	q.Limit, _ = cmd.Flags().GetInt("limit")
	q.Before, _ = cmd.Flags().GetInt64("before")
	page, raw, err := c.ListExecutions(cmd.Context(), q)
	if err != nil {
		return err
	}
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	printExecutionTable(cmd.OutOrStdout(), page.Items)
	if page.Next != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: attune executions list --before %d\n", *page.Next)
	}
	return nil
}

// executionCall is a Client method taking an execution id.
type executionCall func(*Client, context.Context, int64) (store.Execution, json.RawMessage, error)

func runExecutionByID(cmd *cobra.Command, arg string, call executionCall, timeline bool) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("execution id %q: want a positive integer", arg)
	}
	c, err := clientFromFlags(cmd.Flags())
	if err != nil {
		return err
	}
	e, raw, err := call(c, cmd.Context(), id)
	if err != nil {
		return err
	}
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	printExecution(cmd.OutOrStdout(), e, timeline)
	return nil
}

// printRaw prints an API answer as indented JSON.
func printRaw(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
