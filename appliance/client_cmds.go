package appliance

import "github.com/spf13/cobra"

// clientCommands are the commands that talk to a running appliance.
func clientCommands() []*cobra.Command { return nil }
