package executor_test

import "github.com/attune-io/attune/engine/executor"

func runReq(ref string, params map[string]any, timeout *float64) executor.RunRequest {
	return executor.RunRequest{ActionRef: ref, Parameters: params, TimeoutSeconds: timeout}
}
