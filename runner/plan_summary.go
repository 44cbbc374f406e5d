package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// jsonPlan is the part of `show -json` that the summary, the digests and
// the engine's version use. Values stay raw so that numbers keep their
// exact text.
type jsonPlan struct {
	// TerraformVersion is the engine's version (OpenTofu keeps the name).
	TerraformVersion string `json:"terraform_version"`
	ResourceChanges  []struct {
		Address string     `json:"address"`
		Deposed string     `json:"deposed"`
		Change  jsonChange `json:"change"`
	} `json:"resource_changes"`
	OutputChanges map[string]jsonChange `json:"output_changes"`
	PriorState    json.RawMessage       `json:"prior_state"`
}

type jsonChange struct {
	Actions      []string        `json:"actions"`
	Before       json.RawMessage `json:"before"`
	After        json.RawMessage `json:"after"`
	AfterUnknown json.RawMessage `json:"after_unknown"`
}

// canonicalChange is one entry of the document the changes digest is
// computed over.
type canonicalChange struct {
	Address      string   `json:"address,omitempty"`
	Deposed      string   `json:"deposed,omitempty"`
	Actions      []string `json:"actions"`
	Before       any      `json:"before"`
	After        any      `json:"after"`
	AfterUnknown any      `json:"after_unknown"`
}

// summarizePlan counts the changes like terraform's "Plan:" line (a replace
// is one add and one destroy) and computes the changes digest: sha256 over a
// canonical JSON of the planned changes, so that planning the same changes
// again gives the same digest whatever the plan file's bytes.
func summarizePlan(planJSON []byte) (*runnerpb.PlanResult, error) {
	plan, err := decodePlan(planJSON)
	if err != nil {
		return nil, err
	}
	return plan.summary()
}

// decodePlan decodes `show -json` of a plan.
func decodePlan(planJSON []byte) (*jsonPlan, error) {
	var plan jsonPlan
	if err := json.Unmarshal(planJSON, &plan); err != nil {
		return nil, fmt.Errorf("decode JSON plan: %w", err)
	}
	return &plan, nil
}

// summary is summarizePlan of a decoded plan.
func (plan *jsonPlan) summary() (*runnerpb.PlanResult, error) {
	res := &runnerpb.PlanResult{}
	var resources []canonicalChange
	seen := map[string]bool{}
	for _, rc := range plan.ResourceChanges {
		if !isChange(rc.Change.Actions) {
			continue
		}
		switch {
		case slices.Contains(rc.Change.Actions, "create") && slices.Contains(rc.Change.Actions, "delete"):
			res.Add++
			res.Destroy++
		case slices.Contains(rc.Change.Actions, "create"):
			res.Add++
		case slices.Contains(rc.Change.Actions, "delete"):
			res.Destroy++
		case slices.Contains(rc.Change.Actions, "update"):
			res.Change++
		}
		if !seen[rc.Address] {
			seen[rc.Address] = true
			res.Resources = append(res.Resources, rc.Address)
		}
		c, err := canonical(rc.Change)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", rc.Address, err)
		}
		c.Address, c.Deposed = rc.Address, rc.Deposed
		resources = append(resources, c)
	}
	sort.Strings(res.Resources)
	sort.Slice(resources, func(i, j int) bool {
		if resources[i].Address != resources[j].Address {
			return resources[i].Address < resources[j].Address
		}
		return resources[i].Deposed < resources[j].Deposed
	})

	outputs := map[string]canonicalChange{}
	for name, oc := range plan.OutputChanges {
		if !isChange(oc.Actions) {
			continue
		}
		c, err := canonical(oc)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		outputs[name] = c
	}

	doc, err := json.Marshal(struct {
		Resources []canonicalChange          `json:"resource_changes"`
		Outputs   map[string]canonicalChange `json:"output_changes"`
	}{resources, outputs})
	if err != nil {
		return nil, fmt.Errorf("encode changes: %w", err)
	}
	sum := sha256.Sum256(doc)
	res.ChangesDigest = hex.EncodeToString(sum[:])
	if res.StateDigest, err = canonicalDigest(plan.PriorState); err != nil {
		return nil, fmt.Errorf("prior state: %w", err)
	}
	return res, nil
}

// canonicalDigest is sha256 hex over raw JSON with sorted keys and no
// insignificant whitespace ("null" when raw is empty).
func canonicalDigest(raw json.RawMessage) (string, error) {
	var v any
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return "", err
		}
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// isChange is false for no-op and read actions, which terraform's summary
// does not count either.
func isChange(actions []string) bool {
	for _, a := range actions {
		if a != "no-op" && a != "read" {
			return true
		}
	}
	return false
}

// canonical decodes the raw values so that marshalling them again sorts
// object keys and drops insignificant whitespace.
func canonical(c jsonChange) (canonicalChange, error) {
	out := canonicalChange{Actions: c.Actions}
	for _, v := range []struct {
		raw json.RawMessage
		dst *any
	}{{c.Before, &out.Before}, {c.After, &out.After}, {c.AfterUnknown, &out.AfterUnknown}} {
		if len(v.raw) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v.raw))
		dec.UseNumber()
		if err := dec.Decode(v.dst); err != nil {
			return out, err
		}
	}
	return out, nil
}
