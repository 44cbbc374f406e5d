package migrate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statelock"
)

// Manifest is the object as YAML, without the status and the fields the
// API server sets.
func Manifest(obj *v1alpha1.Terraform) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	// The template's metadata is a struct, never omitted when empty.
	if spec, ok := m["spec"].(map[string]any); ok {
		if t, ok := spec["runnerPodTemplate"].(map[string]any); ok {
			if md, ok := t["metadata"].(map[string]any); ok && len(md) == 0 {
				delete(t, "metadata")
			}
		}
	}
	return yaml.Marshal(m)
}

// WriteReport prints what happened to one object: where its state is, what
// happens on deletion, what was not mapped and why.
func (r Result) WriteReport(w io.Writer) {
	src := r.Source
	if r.Object == nil {
		fmt.Fprintf(w, "%s (%s): NOT MIGRATED\n", src.Key(), src.Origin)
		for _, why := range r.Refused {
			fmt.Fprintf(w, "  refused: %s\n", why)
		}
	} else {
		fmt.Fprintf(w, "%s (%s):\n", src.Key(), src.Origin)
		fmt.Fprintf(w, "  state:     %s\n", r.stateLine())
		fmt.Fprintf(w, "  deletion:  %s\n", r.deletionLine())
	}
	if len(r.Unmapped) > 0 {
		fmt.Fprintf(w, "  not mapped:\n")
		for _, u := range r.Unmapped {
			fmt.Fprintf(w, "    - %s: %s\n", u.Field, u.Reason)
		}
	}
	if len(r.Defaults) > 0 {
		fmt.Fprintf(w, "  tofu-controller's defaults, nothing to carry over: %s\n", strings.Join(r.Defaults, ", "))
	}
	if len(r.Same) > 0 {
		fmt.Fprintf(w, "  what Landform always does, nothing to carry over: %s\n", strings.Join(r.Same, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func (r Result) stateLine() string {
	if r.StateSecret == "" {
		return "kept in the custom backend (backendConfig.customConfiguration)"
	}
	ns := r.Source.Namespace
	if ns == "" {
		ns = "the object's namespace"
	}
	line := fmt.Sprintf("adopts Secret %s in %s (and its Lease %s)", r.StateSecret, ns, statelock.LeaseName(r.StateSecret))
	switch {
	case r.StateFound == nil:
		line += "; check it exists before applying"
	case *r.StateFound:
		line += ": found"
	default:
		line += ": NOT FOUND, so Landform would start from an empty state and create every resource again; find the state before applying"
	}
	if r.StateLockHolder != "" {
		line += fmt.Sprintf("; the state is LOCKED by %s: let that run end first", r.StateLockHolder)
	}
	return line
}

func (r Result) deletionLine() string {
	switch {
	case r.OrphanByDefault:
		return "Orphan: deleting the object keeps the resources and the state, as tofu-controller did (destroyResourcesOnDeletion was not true)"
	case r.DeleteOverride:
		return "Delete (--deletion-policy): deleting the object DESTROYS the resources, which tofu-controller kept"
	case r.Object.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete:
		return "Delete: deleting the object destroys the resources, as tofu-controller did (destroyResourcesOnDeletion: true)"
	default:
		return string(r.Object.Spec.DeletionPolicy) + " (--deletion-policy)"
	}
}

// WriteSummary prints the warnings that concern every object, then counts.
func WriteSummary(w io.Writer, results []Result, skipped []string) {
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	var orphaned, destroying []string
	migrated, refused, partial := 0, 0, 0
	for _, r := range results {
		if r.Object == nil {
			refused++
			continue
		}
		migrated++
		if len(r.Unmapped) > 0 {
			partial++
		}
		if r.OrphanByDefault {
			orphaned = append(orphaned, r.Source.Key())
		}
		if r.DeleteOverride {
			destroying = append(destroying, r.Source.Key())
		}
	}
	if len(orphaned) > 0 {
		fmt.Fprintf(w, "\nWARNING: tofu-controller KEEPS a Terraform object's resources when the object is deleted\n"+
			"(destroyResourcesOnDeletion defaults to false); Landform DESTROYS them (deletionPolicy\n"+
			"defaults to Delete). So that deleting them keeps the resources as before, these objects\n"+
			"have deletionPolicy: Orphan: %s.\n"+
			"Pass --deletion-policy=Delete to have Landform destroy the resources on deletion instead.\n",
			strings.Join(orphaned, ", "))
	}
	if len(destroying) > 0 {
		fmt.Fprintf(w, "\nWARNING: --deletion-policy=Delete: deleting these objects DESTROYS their resources,\n"+
			"which tofu-controller kept on deletion: %s.\n", strings.Join(destroying, ", "))
	}
	fmt.Fprintf(w, "\nMigrated %d tofu-controller Terraform object(s)", migrated)
	if partial > 0 {
		fmt.Fprintf(w, ", %d with fields not mapped", partial)
	}
	if refused > 0 {
		fmt.Fprintf(w, "; %d NOT migrated (see \"refused\" above)", refused)
	}
	fmt.Fprintf(w, ". Next: docs/migrating-from-tofu-controller.md (suspend the old objects, apply these, check the first plan has no changes).\n")
}
