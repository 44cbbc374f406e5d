package server

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/runner/internal/chunk"
)

// TestLargePlan moves a plan whose file, JSON and text each span several
// chunks, and applies it from its chunks.
func TestLargePlan(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r := startRunner(t)
	// Random base64 barely compresses, so the plan file stays large too.
	content := base64.StdEncoding.EncodeToString(randomBytes(t, 2<<20))
	tb := buildTarball(t, map[string][]byte{"large/large.txt": []byte(content)})
	upload(t, ctx, r.client, workspaceSpec(t, tb, "large", nil, t.TempDir()), tb)

	plan, err := r.client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"plan file": plan.PlanFile, "JSON plan": plan.JSONPlan, "human plan": plan.HumanPlan} {
		if len(data) <= 2*chunk.Size {
			t.Errorf("%s is %d bytes, want more than two chunks", name, len(data))
		}
	}
	if !strings.Contains(string(plan.JSONPlan), content) || !strings.Contains(string(plan.HumanPlan), content[:1000]) {
		t.Fatal("plan lost content on the way")
	}
	var doc map[string]any
	if err := json.Unmarshal(plan.JSONPlan, &doc); err != nil {
		t.Fatalf("JSON plan reassembled wrongly: %v", err)
	}

	outs, err := r.client.Apply(ctx, plan.PlanFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if got, want := string(outputsByName(outs)["sha256"].GetValueJson()), `"`+hex.EncodeToString(sum[:])+`"`; got != want {
		t.Fatalf("applied content hash %s, want %s", got, want)
	}
}
