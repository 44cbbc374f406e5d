package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// jsonPlan is the part of `show -json` that the summary, the digests and
// the engine's version use, in terraform-json's types (the CLI reads the
// same document with them). It is not tfjson.Plan itself: the state digest
// is over the prior state exactly as the engine printed it, which
// tfjson.State would re-encode through its own fields, and a plan id is
// made from that digest: a new digest for the same state would give every
// plan a new id after an upgrade, and lose its approval. Decoded with
// UseNumber (decodePlan), so that numbers keep their exact text.
type jsonPlan struct {
	// TerraformVersion is the engine's version (OpenTofu keeps the name).
	TerraformVersion string                    `json:"terraform_version"`
	ResourceChanges  []*tfjson.ResourceChange  `json:"resource_changes"`
	OutputChanges    map[string]*tfjson.Change `json:"output_changes"`
	PriorState       json.RawMessage           `json:"prior_state"`
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
	// Importing is omitted when nil, so that the digest of a plan without
	// imports is what it was before imports were counted.
	Importing *tfjson.Importing `json:"importing,omitempty"`
}

// summarizePlan counts the changes like terraform's "Plan:" line (a replace
// is one add and one destroy, an import is counted apart from what else the
// change does), names the resources it destroys, replaces or imports, and
// computes the changes digest: sha256 over a canonical JSON of the
// planned changes, so that planning the same changes again gives the same
// digest whatever the plan file's bytes.
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
	dec := json.NewDecoder(bytes.NewReader(planJSON))
	dec.UseNumber()
	if err := dec.Decode(&plan); err != nil {
		return nil, fmt.Errorf("decode JSON plan: %w", err)
	}
	return &plan, nil
}

// summary is summarizePlan of a decoded plan.
func (plan *jsonPlan) summary() (*runnerpb.PlanResult, error) {
	res := &runnerpb.PlanResult{}
	var resources []canonicalChange
	changed, replaced, destroyed, imported := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, rc := range plan.ResourceChanges {
		// An import is a change whatever its actions: an import-only
		// plan ("no-op") must be applied to record the object in the
		// state.
		importing := rc != nil && rc.Change != nil && rc.Change.Importing != nil
		if rc == nil || rc.Change == nil || (!isChange(rc.Change.Actions) && !importing) {
			continue
		}
		if importing {
			imported[rc.Address] = true
		}
		switch kindOf(rc.Change.Actions) {
		case replaceChange:
			res.Add++
			res.Destroy++
			replaced[rc.Address] = true
		case createChange:
			res.Add++
		case destroyChange:
			res.Destroy++
			destroyed[rc.Address] = true
		case updateChange:
			res.Change++
		}
		changed[rc.Address] = true
		c := canonical(rc.Change)
		c.Address, c.Deposed = rc.Address, rc.DeposedKey
		resources = append(resources, c)
	}
	// An address both replaced and destroyed (a deposed object of a
	// replaced resource) is named once, as replaced.
	for addr := range replaced {
		delete(destroyed, addr)
	}
	res.Resources = sortedKeys(changed)
	res.ResourcesToReplace = sortedKeys(replaced)
	res.ResourcesToDestroy = sortedKeys(destroyed)
	res.ResourcesToImport = sortedKeys(imported)
	res.ImportCount = int32(len(imported))
	sort.Slice(resources, func(i, j int) bool {
		if resources[i].Address != resources[j].Address {
			return resources[i].Address < resources[j].Address
		}
		return resources[i].Deposed < resources[j].Deposed
	})

	outputs := map[string]canonicalChange{}
	for name, oc := range plan.OutputChanges {
		if oc == nil || !isChange(oc.Actions) {
			continue
		}
		outputs[name] = canonical(oc)
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

// changeKind is what a resource change does to the real object.
type changeKind int

const (
	// otherChange: no-op, read, or forget (removed from the state, the
	// object kept): nothing is destroyed.
	otherChange changeKind = iota
	createChange
	updateChange
	// destroyChange: ["delete"], the object is destroyed.
	destroyChange
	// replaceChange: ["delete","create"] or ["create","delete"] (create
	// before destroy), the object is destroyed and a new one created.
	replaceChange
)

// kindOf classifies a change's actions. Only a "delete" destroys an object:
// a "forget" leaves it where it is, whatever it is combined with.
func kindOf(actions tfjson.Actions) changeKind {
	create, remove := slices.Contains(actions, tfjson.ActionCreate), slices.Contains(actions, tfjson.ActionDelete)
	switch {
	case create && remove:
		return replaceChange
	case create:
		return createChange
	case remove:
		return destroyChange
	case slices.Contains(actions, tfjson.ActionUpdate):
		return updateChange
	}
	return otherChange
}

// sortedKeys is the set's members, sorted; nil when it is empty.
func sortedKeys(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
func isChange(actions tfjson.Actions) bool {
	for _, a := range actions {
		if a != tfjson.ActionNoop && a != tfjson.ActionRead {
			return true
		}
	}
	return false
}

// canonical is the digest's entry for a change. Its values were decoded
// with UseNumber, so that marshalling them again sorts object keys, drops
// insignificant whitespace and keeps numbers as they were.
func canonical(c *tfjson.Change) canonicalChange {
	actions := make([]string, len(c.Actions))
	for i, a := range c.Actions {
		actions[i] = string(a)
	}
	return canonicalChange{Actions: actions, Before: c.Before, After: c.After, AfterUnknown: c.AfterUnknown, Importing: c.Importing}
}
