package runlog

import (
	"context"
	"errors"
	"testing"
)

// A final write that fails (the API server away when the run ended) can be
// retried: End again writes the whole log, marked failed, once the API
// server answers.
func TestEndRetriedAfterAFailedWrite(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := env.Terraform(t, ns, "app")
	rec := Start(ctx, env.Client, owner, PhasePlan)
	rec.Line("Error: the provider could not reach its endpoint")

	away, cancel := context.WithCancel(ctx)
	cancel()
	runErr := errors.New("plan failed")
	if err := rec.End(away, runErr); err == nil {
		t.Fatal("End on a cancelled context wrote the log")
	}
	if err := rec.End(ctx, runErr); err != nil {
		t.Fatalf("End retried: %v", err)
	}
	logs, err := Read(ctx, env.Client, ns, owner.Name)
	if err != nil {
		t.Fatal(err)
	}
	got := logs[PhasePlan]
	if got.State != StateFailed || got.Text != "Error: the provider could not reach its endpoint\n" {
		t.Fatalf("kept log: %+v", got)
	}
}
