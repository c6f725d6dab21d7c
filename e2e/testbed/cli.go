package testbed

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// CLIResult is what one run of the kafka-cluster-mirrors binary printed,
// and its exit code.
type CLIResult struct {
	Stdout, Stderr string
	Code           int
}

// RunCLI runs the kafka-cluster-mirrors binary at bin with args, for at
// most two minutes. A non-zero exit is a result; a binary that cannot be
// run at all fails t.
func RunCLI(t testing.TB, bin string, args ...string) CLIResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := CLIResult{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kafka-cluster-mirrors %v: %v", args, err)
	}
	return r
}
