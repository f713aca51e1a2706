// Command attune is the Attune appliance: server, CLI client and benchmark.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/attune-io/attune/appliance"
)

func main() {
	if err := appliance.NewRootCommand().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "attune:", err)
		os.Exit(1)
	}
}
