package packs

import (
	"fmt"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker/runtime"
)

// Core returns the built-in core pack: one builtin action per
// runtime.Builtins() entry (core.echo, core.http_request, core.local,
// core.noop, core.sleep), with the schema and description the runtime
// declares, so the catalogue always matches what the worker executes.
func Core() Pack {
	p := Pack{Pack: store.Pack{Ref: CorePack, Description: "Built-in actions that run inside the worker."}}
	for _, b := range runtime.Builtins() {
		spec := ActionSpec{
			Ref: CorePack + "." + b.Name, Description: b.Description,
			Runtime: runtime.Builtin, Entrypoint: b.Name, Parameters: b.Parameters,
		}
		a, err := spec.ToAction(CorePack, "", "")
		if err != nil {
			// The builtins table is code; a bad entry is a programming error
			// that the package tests catch, not something to recover from.
			panic(fmt.Sprintf("packs: builtin %s: %v", b.Name, err))
		}
		p.Actions = append(p.Actions, a)
	}
	return p
}
