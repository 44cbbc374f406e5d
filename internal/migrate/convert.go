package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/statelock"
)

// Options steer a conversion.
type Options struct {
	// DeletionPolicy overrides the policy derived from
	// destroyResourcesOnDeletion when set.
	DeletionPolicy v1alpha1.DeletionPolicy
	// KeepAuto keeps approvePlan auto. Without it the migrated object
	// waits for a person's approval of its first plan: every difference
	// the report states (another engine, a lock file that now pins
	// providers, variables that win differently) shows in that plan, and
	// auto would apply it unread.
	KeepAuto bool
}

// Unmapped is a source field that has no place in the Landform object.
type Unmapped struct {
	Field  string
	Reason string
}

// Result is one converted object with everything its report says.
type Result struct {
	Source Source
	// Object is the Landform object; nil when Refused.
	Object *v1alpha1.Terraform
	// Refused says why the object cannot be migrated as it is.
	Refused []string
	// StateSecret is the kubernetes backend's state Secret both
	// controllers use; empty with a custom backend.
	StateSecret string
	// StateFound is set by a caller that looked for StateSecret in the
	// cluster: true when it exists.
	StateFound *bool
	// StateLockHolder is set by a caller that found the state's Lease held.
	StateLockHolder string
	// OrphanByDefault: deletionPolicy Orphan was set because the source
	// kept its resources on deletion (tofu-controller's default).
	OrphanByDefault bool
	// DeleteOverride: --deletion-policy=Delete where the source kept its
	// resources.
	DeleteOverride bool
	// Unmapped are the fields with no equivalent.
	Unmapped []Unmapped
	// Defaults are fields set to tofu-controller's defaults: nothing to
	// carry over.
	Defaults []string
	// Same are fields set to what Landform always does: nothing to carry
	// over either.
	Same []string
	// Notes are differences in behaviour worth knowing before applying.
	Notes []string
}

// Landform's validation of names it takes from the source (the CRD's
// patterns).
var (
	secretSuffixPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	workspacePattern    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	// stateWorkspacePattern is a workspace that can be part of a Secret's
	// name, as the CRD requires with the default backend.
	stateWorkspacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	variablePattern       = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)
)

// converter carries one conversion's state.
type converter struct {
	src Source
	out *v1alpha1.Terraform
	res *Result
	// workspace and secretSuffix as tofu-controller uses them (a name
	// longer than 63 characters never held state there: the backend labels
	// the state Secret with its suffix; Landform's default is then the name
	// cut and hashed).
	workspace     string
	secretSuffix  string
	customBackend bool
	// tfVars are the runner env's TF_VAR_ entries, placed by finishVars.
	tfVars []tfVar
	// engineEnv are runner env entries that look as if they chose the
	// engine's version.
	engineEnv []engineEnv
	// imageSet: runnerPodTemplate.spec.image was set.
	imageSet bool
	// autoApprove: the source's approvePlan was auto.
	autoApprove bool
}

// Convert maps src onto a Landform Terraform object.
func Convert(src Source, o Options) Result {
	res := Result{Source: src}
	out := &v1alpha1.Terraform{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.TerraformKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        src.Name,
			Namespace:   src.Namespace,
			Labels:      keepLabels(src.Labels),
			Annotations: keepAnnotations(src.Annotations),
		},
	}
	c := &converter{src: src, out: out, res: &res, workspace: "default", secretSuffix: names.Label(src.Name)}

	keys := slices.Sorted(maps.Keys(src.Spec))
	for _, k := range keys {
		raw := src.Spec[k]
		if isNull(raw) {
			continue
		}
		field := "spec." + k
		h, ok := fields[k]
		if !ok {
			c.unmapped(field, "unknown to landform migrate (a newer tofu-controller field?): nothing was carried over")
			continue
		}
		if err := h(c, field, raw); err != nil {
			c.refuse("%s: %v", field, err)
		}
	}
	c.finish(o)
	if len(res.Refused) == 0 {
		res.Object = out
	}
	return res
}

func (c *converter) unmapped(field, reason string) {
	c.res.Unmapped = append(c.res.Unmapped, Unmapped{Field: field, Reason: reason})
}

func (c *converter) note(format string, args ...any) {
	c.res.Notes = append(c.res.Notes, fmt.Sprintf(format, args...))
}

func (c *converter) refuse(format string, args ...any) {
	c.res.Refused = append(c.res.Refused, fmt.Sprintf(format, args...))
}

func (c *converter) defaulted(field string) { c.res.Defaults = append(c.res.Defaults, field) }

func (c *converter) same(field string) { c.res.Same = append(c.res.Same, field) }

// finish decides what depends on more than one field: deletion, state,
// and what the status says.
func (c *converter) finish(o Options) {
	spec := &c.out.Spec
	if _, ok := c.src.Spec["interval"]; !ok {
		c.note("spec.interval was missing (tofu-controller requires it): Landform's default, 10m, applies")
	}
	if _, ok := c.src.Spec["sourceRef"]; !ok {
		c.refuse("spec.sourceRef is missing")
	}
	if len(c.res.Refused) == 0 {
		// What changes without a field saying so; for a refused object
		// once it is fixed.
		if isNull(c.src.Spec["upgradeOnInit"]) {
			c.upgradedOnInit("spec.upgradeOnInit is not set, so true (tofu-controller's default)")
		}
		c.finishVars()
		c.finishVarsPrecedence()
		c.finishEngine()
		c.finishTimeouts()
	}

	destroyOnDeletion := false
	if raw, ok := c.src.Spec["destroyResourcesOnDeletion"]; ok && !isNull(raw) {
		_ = json.Unmarshal(raw, &destroyOnDeletion)
	}
	switch {
	case o.DeletionPolicy != "":
		spec.DeletionPolicy = o.DeletionPolicy
		c.res.DeleteOverride = o.DeletionPolicy == v1alpha1.DeletionPolicyDelete && !destroyOnDeletion
	case destroyOnDeletion:
		spec.DeletionPolicy = v1alpha1.DeletionPolicyDelete
	default:
		spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
		c.res.OrphanByDefault = true
	}

	c.finishApproval(o)
	c.checkRunnerPolicy()
	if spec.ServiceAccountName != "" {
		c.note("spec.serviceAccountName %s is carried over: it must exist in namespace %s, and a controller run with --enforce-default-service-account refuses it (RunnerServiceAccountNotAllowed)", spec.ServiceAccountName, c.src.Namespace)
	} else {
		c.note("tofu-controller ran the module as ServiceAccount %s, Landform runs it as landform-runner (or the operator's default): give that account the cloud permissions %s had (IRSA or workload identity annotations), or set spec.serviceAccountName: %s", defaultRunnerServiceAccount, defaultRunnerServiceAccount, defaultRunnerServiceAccount)
	}

	if !c.customBackend {
		c.res.StateSecret = statelock.StateSecretName(c.workspace, c.secretSuffix)
	}

	if st := c.src.Status; st != nil {
		if st.Plan.Pending != "" {
			c.note("tofu-controller has plan %s pending: its changes were never applied, so Landform's first plan shows them", st.Plan.Pending)
		}
		if st.Lock.Pending != "" {
			c.note("tofu-controller reports the state locked (lock %s): let its run end, or release the lock, before the migrated object runs", st.Lock.Pending)
		}
	}
}

// workspaceName is the source's workspace, whichever order fields are
// read in.
func (c *converter) workspaceName() string {
	var ws string
	_ = json.Unmarshal(c.src.Spec["workspace"], &ws)
	if ws == "" {
		return "default"
	}
	return ws
}

// handler maps one spec field.
type handler func(c *converter, field string, raw json.RawMessage) error

// fields maps tofu-controller's TerraformSpec, field by field.
var fields = map[string]handler{
	"sourceRef": func(c *converter, field string, raw json.RawMessage) error {
		var ref struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
		}
		if err := strict(raw, &ref); err != nil {
			return err
		}
		switch ref.Kind {
		case "GitRepository", "OCIRepository", "Bucket":
		default:
			return fmt.Errorf("kind %q is not a Flux source Landform reads (GitRepository, OCIRepository, Bucket)", ref.Kind)
		}
		c.out.Spec.SourceRef = v1alpha1.SourceReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, Namespace: ref.Namespace}
		if ref.Namespace != "" && ref.Namespace != c.src.Namespace {
			c.note("sourceRef names namespace %s: Landform refuses references to other namespaces (CrossNamespaceRefDenied) unless the controller runs with --no-cross-namespace-refs=false", ref.Namespace)
		}
		return nil
	},
	"path": func(c *converter, field string, raw json.RawMessage) error {
		return strict(raw, &c.out.Spec.Path)
	},
	"interval": func(c *converter, field string, raw json.RawMessage) error {
		d, err := duration(raw)
		if err != nil {
			return err
		}
		c.out.Spec.Interval = *d
		return nil
	},
	"retryInterval": func(c *converter, field string, raw json.RawMessage) error {
		d, err := duration(raw)
		if err != nil {
			return err
		}
		c.out.Spec.RetryInterval = d
		return nil
	},
	"suspend": func(c *converter, field string, raw json.RawMessage) error {
		if err := strict(raw, &c.out.Spec.Suspend); err != nil {
			return err
		}
		if c.out.Spec.Suspend {
			c.note("spec.suspend is true and carried over: the Landform object does nothing until resumed (landform resume %s)", c.src.Name)
		}
		return nil
	},
	"approvePlan": func(c *converter, field string, raw json.RawMessage) error {
		var v string
		if err := strict(raw, &v); err != nil {
			return err
		}
		switch v {
		case "auto":
			c.autoApprove = true
		case "":
		case "disable":
			c.out.Spec.PlanOnly = true
			c.note(`approvePlan "disable" (drift detection only) became planOnly: true: Landform plans every interval and never applies`)
		default:
			c.note("approvePlan %q approved a tofu-controller plan; Landform's plan ids are made differently, so the object waits for manual approval: approve its first plan (landform approve %s) or commit its id", v, c.src.Name)
		}
		return nil
	},
	"destroy": func(c *converter, field string, raw json.RawMessage) error {
		return strict(raw, &c.out.Spec.Destroy)
	},
	"planOnly": func(c *converter, field string, raw json.RawMessage) error {
		var v bool
		if err := strict(raw, &v); err != nil {
			return err
		}
		c.out.Spec.PlanOnly = c.out.Spec.PlanOnly || v
		return nil
	},
	"disableDriftDetection": func(c *converter, field string, raw json.RawMessage) error {
		return strict(raw, &c.out.Spec.DisableDriftDetection)
	},
	"destroyResourcesOnDeletion": func(c *converter, field string, raw json.RawMessage) error {
		var v bool
		return strict(raw, &v) // decided in finish
	},
	"workspace": func(c *converter, field string, raw json.RawMessage) error {
		var v string
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v == "" || v == "default" {
			return nil
		}
		if !workspacePattern.MatchString(v) {
			return fmt.Errorf("workspace %q does not fit Landform's workspace names (letters, digits, '_', '.', '-'; at most 63)", v)
		}
		// backendConfig is read first (fields go in name order).
		if !c.customBackend && !stateWorkspacePattern.MatchString(v) {
			return fmt.Errorf("workspace %q cannot be part of the state Secret's name tfstate-<workspace>-<suffix> (lowercase letters, digits, '-' and '.'), so the kubernetes backend never stored a state for it: "+
				"choose a workspace that can, or migrate with the module's own backend in backendConfig.customConfiguration", v)
		}
		c.workspace = v
		c.out.Spec.Workspace = v
		return nil
	},
	"backendConfig":      backendConfig,
	"backendConfigsFrom": unmappedBecause("Landform reads no backend settings from Secrets or ConfigMaps: pass the backend's credentials to the runner as environment variables (runnerPodTemplate.spec.env/envFrom, e.g. AWS_ACCESS_KEY_ID) and keep the rest in backendConfig.customConfiguration"),
	"cloud": func(c *converter, field string, raw json.RawMessage) error {
		return fmt.Errorf("the state is in Terraform Cloud or Enterprise, whose token is in the spec: write backendConfig.customConfiguration yourself (terraform { cloud { … } }) and give the runner the token as TF_TOKEN_<host> from a Secret (runnerPodTemplate.spec.env)")
	},
	"vars":     vars,
	"varsFrom": varsFrom,
	"values": func(c *converter, field string, raw json.RawMessage) error {
		if bytes.Contains(raw, []byte("${{")) {
			c.unmapped(field, "a template over readInputsFromSecrets: Landform renders no templates; read the Secret's keys as variables with varsFrom (varsKeys key:variable) and change the module to take them")
			return nil
		}
		c.out.Spec.Vars = append(c.out.Spec.Vars, v1alpha1.Variable{Name: "values", Value: &apiextensionsv1.JSON{Raw: compact(raw)}})
		c.note(`spec.values became the variable "values" (as tofu-controller passed it)`)
		return nil
	},
	"readInputsFromSecrets": unmappedBecause("Landform renders no templates over Secrets: read their keys as variables with varsFrom (varsKeys key:variable)"),
	"tfVarsFiles":           unmappedBecause("Landform passes no -var-file, and tofu-controller's -var-file won over every other input: move their values into vars (or varsFrom), which win over the module's files; a file renamed to *.auto.tfvars wins only when its name sorts after landform.auto.tfvars.json (say zz-prod.auto.tfvars), and otherwise loses to vars"),
	"fileMappings":          unmappedBecause("Landform writes no files from Secrets into the workspace or home directory: mount the Secret with runnerPodTemplate.spec.volumes and volumeMounts, and point the tool at it with an environment variable"),
	"retryStrategy": defaultOr("StaticInterval",
		"Landform retries every retryInterval, without exponential backoff"),
	"maxRetryInterval": unmappedBecause("Landform retries every retryInterval, without exponential backoff"),
	"force":            defaultOr(false, "Landform has no forced re-apply: run `landform replan NAME` to plan again now"),
	"writeOutputsToSecret": func(c *converter, field string, raw json.RawMessage) error {
		var w v1alpha1.WriteOutputsToSecretSpec
		if err := strict(raw, &w); err != nil {
			return err
		}
		if w.Name == "" {
			c.unmapped(field, "no name: tofu-controller wrote no Secret")
			return nil
		}
		outs := w.Outputs[:0:0]
		for _, o := range w.Outputs {
			if o != "" {
				outs = append(outs, o)
			}
		}
		w.Outputs = outs
		c.out.Spec.WriteOutputsToSecret = &w
		longName := ""
		if len(c.src.Name) > names.MaxLabelValue {
			longName = fmt.Sprintf(" (a label value has at most %d characters: the name is cut and hashed)", names.MaxLabelValue)
		}
		c.note("outputs Secret %s: tofu-controller's object controls it, and Landform will not take over a Secret it does not own. Before applying, take it from the old object (docs/migrating-from-tofu-controller.md): "+
			"remove its ownerReferences and label it %s=%s, %s=%s%s", w.Name, v1alpha1.ManagedByLabel, v1alpha1.ManagedByValue, v1alpha1.OwnerNameLabel, names.Label(c.src.Name), longName)
		c.note("outputs Secret %s: for each output that is not a string, tofu-controller also wrote the key <output>__type (its type) and the value as terraform printed it (indented JSON). "+
			"Landform writes the values only, as compact JSON, and keeps keys it did not write: the __type keys stay as they are, never updated; remove them once nothing reads them (readInputsFromSecrets of a tofu-controller object, your own tooling)", w.Name)
		return nil
	},
	"cliConfigSecretRef": unmappedBecause("Landform's runners use the read-only provider mirrors the operator configures (--provider-mirror) and pass no CLI configuration: ask the operator to mirror the providers, or put registry credentials in TF_TOKEN_<host> (runnerPodTemplate.spec.env from a Secret)"),
	"healthChecks":       unmappedBecause("Landform runs no health checks after an apply: check the endpoints with a Flux Kustomization health check or a readiness probe of the workload that uses them"),
	"serviceAccountName": func(c *converter, field string, raw json.RawMessage) error {
		var v string
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v == "" || v == defaultRunnerServiceAccount {
			c.defaulted(field)
			return nil
		}
		c.out.Spec.ServiceAccountName = v
		return nil
	},
	"alwaysCleanupRunnerPod": defaultOr(true, "Landform starts a runner Pod per run and removes it after the run"),
	"runnerTerminationGracePeriodSeconds": defaultOr(30,
		"Landform gives terraform the time it needs to stop: it is interrupted gracefully at spec.timeout, and runs in flight finish on their own"),
	"upgradeOnInit": func(c *converter, field string, raw json.RawMessage) error {
		var v bool
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v {
			c.upgradedOnInit("spec.upgradeOnInit is true (tofu-controller's default)")
		} else {
			c.same(field)
		}
		return nil
	},
	"refreshBeforeApply": defaultOr(false, "Landform applies the saved plan, which refreshed the state when it was made"),
	"runnerPodTemplate":  runnerPodTemplate,
	"enableInventory":    defaultOr(false, "Landform keeps no inventory: status.plan.resources lists the resources a plan changes"),
	"tfstate": func(c *converter, field string, raw json.RawMessage) error {
		var v struct {
			ForceUnlock    string `json:"forceUnlock"`
			LockIdentifier string `json:"lockIdentifier"`
			LockTimeout    string `json:"lockTimeout"`
		}
		if err := strict(raw, &v); err != nil {
			return err
		}
		if (v.ForceUnlock == "" || v.ForceUnlock == "no") && v.LockIdentifier == "" && (v.LockTimeout == "" || v.LockTimeout == "0s") {
			c.defaulted(field)
			return nil
		}
		c.unmapped(field, "Landform releases a lock left by one of its runners that is gone by itself; any other lock is reported (StateLocked) and released with `landform unlock NAME --force`; it does not wait for locks")
		return nil
	},
	"targets":           unmappedBecause("Landform plans the whole module: resources outside the targets show up in its first plan, review it before approving (or split the module)"),
	"parallelism":       defaultOr(0, "Landform runs terraform with its default parallelism"),
	"storeReadablePlan": defaultOr("none", "no field needed: Landform always keeps the plan readable (`landform plan show NAME [--json]`)"),
	"plan": func(c *converter, field string, raw json.RawMessage) error {
		var v struct {
			Lock *bool `json:"lock"`
		}
		if err := json.Unmarshal(raw, &v); err == nil && (v.Lock == nil || *v.Lock) {
			// What Landform always does.
			c.same(field)
			return nil
		}
		c.unmapped(field, "Landform's plans always take the state lock")
		return nil
	},
	"webhooks":      unmappedBecause("Landform calls no webhooks after planning: gate applies with manual approval (approvePlan empty) instead"),
	"dependsOn":     dependsOn,
	"enterprise":    unmappedBecause("tofu-controller's enterprise placeholder has no meaning in Landform"),
	"breakTheGlass": defaultOr(false, "Landform has no interactive break-the-glass shell: suspend the object (landform suspend NAME) and run terraform against its state yourself"),
	"branchPlanner": unmappedBecause("Landform plans pull requests with previews instead: a Terraform object with spec.preview per pull request, made and removed by a Flux Operator ResourceSet, planning against a snapshot of this object's state (docs/previews.md)"),
	"remediation":   unmappedBecause("Landform retries every retryInterval without a retry limit"),
}

// unmappedBecause reports the field as unmapped, whatever its value.
func unmappedBecause(reason string) handler {
	return func(c *converter, field string, raw json.RawMessage) error {
		if isZero(raw) {
			c.defaulted(field)
			return nil
		}
		c.unmapped(field, reason)
		return nil
	}
}

// defaultOr accepts tofu-controller's default value as nothing to carry
// over and reports any other value as unmapped.
func defaultOr(def any, reason string) handler {
	want, _ := json.Marshal(def)
	return func(c *converter, field string, raw json.RawMessage) error {
		if isNull(raw) || bytes.Equal(compact(raw), want) {
			c.defaulted(field)
			return nil
		}
		c.unmapped(field, reason)
		return nil
	}
}

func backendConfig(c *converter, field string, raw json.RawMessage) error {
	var b struct {
		Disable             bool              `json:"disable"`
		SecretSuffix        string            `json:"secretSuffix"`
		InClusterConfig     bool              `json:"inClusterConfig"`
		CustomConfiguration string            `json:"customConfiguration"`
		ConfigPath          string            `json:"configPath"`
		Labels              map[string]string `json:"labels"`
	}
	if err := strict(raw, &b); err != nil {
		return err
	}
	if b.Disable {
		return fmt.Errorf("disable: true: tofu-controller wrote no backend, so the state was wherever the module's own backend block put it (or in the runner Pod, lost after each run). " +
			"Landform would use the kubernetes backend and find no state: put the module's backend block in backendConfig.customConfiguration of the migrated object yourself")
	}
	if custom := strings.TrimSpace(b.CustomConfiguration); custom != "" {
		// tofu-controller wraps the block in terraform { }; Landform takes
		// the whole block.
		c.out.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: "terraform {\n" + indent(custom, "  ") + "\n}\n"}
		c.customBackend = true
		if b.SecretSuffix != "" {
			c.note("backendConfig.secretSuffix was ignored by tofu-controller beside customConfiguration, and is left out")
		}
		c.note("the state stays in the custom backend; Landform's runners need that backend's credentials (runnerPodTemplate.spec.env/envFrom)")
	} else {
		switch {
		case b.SecretSuffix == "":
			c.note("backendConfig sets no secretSuffix: tofu-controller then configured secret_suffix = \"\", which the kubernetes backend refuses, so there was no state to keep; Landform uses Secret tfstate-<workspace>-%s", c.secretSuffix)
		case len(b.SecretSuffix) > names.MaxLabelValue:
			c.note("backendConfig.secretSuffix has more than %d characters: the kubernetes backend labels the state Secret with it, which Kubernetes refuses, so there was no state to keep; Landform uses Secret tfstate-<workspace>-%s", names.MaxLabelValue, c.secretSuffix)
		case b.SecretSuffix == c.src.Name && !secretSuffixPattern.MatchString(b.SecretSuffix):
			// Landform's default suffix is the name: the same Secret
			// without the field, which would not accept this name.
		case !secretSuffixPattern.MatchString(b.SecretSuffix):
			ws := c.workspaceName()
			return fmt.Errorf("%q is not a secretSuffix Landform accepts (a DNS label: lowercase letters, digits and '-', at most 63 characters), so it cannot name the state Secret %s. "+
				"Copy that Secret to %s (Landform's default name for this object) and migrate without secretSuffix",
				b.SecretSuffix, statelock.StateSecretName(ws, b.SecretSuffix), statelock.StateSecretName(ws, c.secretSuffix))
		default:
			c.secretSuffix = b.SecretSuffix
			c.out.Spec.BackendConfig = &v1alpha1.BackendConfig{SecretSuffix: b.SecretSuffix}
		}
		if b.InClusterConfig {
			c.unmapped(field+".inClusterConfig", "Landform points the kubernetes backend at this cluster itself (its runners get a token of their own for the state)")
		}
		if b.ConfigPath != "" {
			c.unmapped(field+".configPath", "Landform points the kubernetes backend at this cluster itself; if "+b.ConfigPath+" named another cluster, the state is there: use backendConfig.customConfiguration instead")
		}
	}
	if len(b.Labels) > 0 {
		c.unmapped(field+".labels", "Landform sets no extra labels on the state Secret; the existing Secret keeps them (the backend does not rewrite labels)")
	}
	return nil
}

func vars(c *converter, field string, raw json.RawMessage) error {
	var vs []struct {
		Name      string                `json:"name"`
		Value     *apiextensionsv1.JSON `json:"value"`
		ValueFrom json.RawMessage       `json:"valueFrom"`
	}
	if err := strict(raw, &vs); err != nil {
		return err
	}
	for i, v := range vs {
		if !variablePattern.MatchString(v.Name) {
			return fmt.Errorf("variable name %q is not a terraform variable name", v.Name)
		}
		if len(v.ValueFrom) > 0 && !isNull(v.ValueFrom) {
			c.unmapped(fmt.Sprintf("%s[%d].valueFrom", field, i), fmt.Sprintf("tofu-controller never read valueFrom (variable %s got no value from it): to pass a Secret's or ConfigMap's key use varsFrom with varsKeys [\"key:%s\"]", v.Name, v.Name))
			if v.Value == nil {
				continue
			}
		}
		val := v.Value
		if val != nil {
			val = &apiextensionsv1.JSON{Raw: compact(val.Raw)}
		}
		c.out.Spec.Vars = append(c.out.Spec.Vars, v1alpha1.Variable{Name: v.Name, Value: val})
	}
	return nil
}

func varsFrom(c *converter, field string, raw json.RawMessage) error {
	var refs []v1alpha1.VarsReference
	if err := strict(raw, &refs); err != nil {
		return err
	}
	c.out.Spec.VarsFrom = append(c.out.Spec.VarsFrom, refs...)
	// Which variables both set: varsFrom won in tofu-controller, vars win
	// in Landform.
	inline := map[string]bool{}
	for _, v := range c.src.varNames() {
		inline[v] = true
	}
	clash := map[string]bool{}
	allKeys := false
	for _, r := range refs {
		if len(r.VarsKeys) == 0 {
			allKeys = true
		}
		for _, k := range r.VarsKeys {
			name := k
			if i := strings.Index(k, ":"); i >= 0 {
				name = k[i+1:]
			}
			if inline[name] {
				clash[name] = true
			}
		}
	}
	// tofu-controller's varsFrom overrode these: keep its value.
	kept := c.out.Spec.Vars[:0]
	for _, v := range c.out.Spec.Vars {
		if clash[v.Name] {
			c.unmapped("spec.vars "+v.Name, "varsFrom sets it too, and tofu-controller let varsFrom's value win; Landform would let vars win, so it is left out and varsFrom's value is used as before")
			continue
		}
		kept = append(kept, v)
	}
	c.out.Spec.Vars = kept
	if allKeys && len(inline) > 0 {
		c.note("varsFrom reads every key of a Secret or ConfigMap and vars sets variables too: where both name one variable tofu-controller took varsFrom's value and Landform takes vars' value; check that no such key names a variable in vars")
	}
	if slices.ContainsFunc(refs, func(r v1alpha1.VarsReference) bool { return len(r.VarsKeys) > 0 }) {
		c.note(`a key that varsKeys names and the object lacks: tofu-controller passed "" for a Secret's key (and for every listed key of a missing optional Secret) and left a ConfigMap's variable unset; ` +
			"Landform stops with VarsNotFound, or, with optional: true, leaves the variable to the module's default: check that every key exists")
	}
	c.note("varsFrom values are passed as strings by tofu-controller; Landform passes a value written as a JSON object or list as that object or list: check that no such value is meant as a string")
	return nil
}

// varNames are the names spec.vars sets.
func (s Source) varNames() []string {
	var vs []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(s.Spec["vars"], &vs)
	names := make([]string, 0, len(vs))
	for _, v := range vs {
		names = append(names, v.Name)
	}
	if !isNull(s.Spec["values"]) {
		names = append(names, "values")
	}
	return names
}

func dependsOn(c *converter, field string, raw json.RawMessage) error {
	var deps []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := strict(raw, &deps); err != nil {
		return err
	}
	var names []string
	for _, d := range deps {
		c.out.Spec.DependsOn = append(c.out.Spec.DependsOn, v1alpha1.DependencyReference{Name: d.Name, Namespace: d.Namespace})
		names = append(names, d.Name)
		if d.Namespace != "" && d.Namespace != c.src.Namespace {
			c.note("dependsOn %s/%s is in another namespace: Landform refuses that (CrossNamespaceRefDenied) unless the controller runs with --no-cross-namespace-refs=false", d.Namespace, d.Name)
		}
	}
	if len(names) > 0 {
		c.note("dependsOn now means Landform Terraform objects: migrate %s too", strings.Join(names, ", "))
	}
	return nil
}

func runnerPodTemplate(c *converter, field string, raw json.RawMessage) error {
	var t struct {
		Metadata v1alpha1.RunnerPodMetadata `json:"metadata"`
		Spec     map[string]json.RawMessage `json:"spec"`
	}
	if err := strict(raw, &t); err != nil {
		return err
	}
	out := &v1alpha1.RunnerPodTemplate{Metadata: t.Metadata}
	spec := &out.Spec
	keys := slices.Sorted(maps.Keys(t.Spec))
	for _, k := range keys {
		raw := t.Spec[k]
		f := field + ".spec." + k
		if isZero(raw) {
			continue
		}
		var err error
		switch k {
		case "image":
			var image string
			if err = strict(raw, &image); err == nil {
				c.runnerImageField(f, image)
			}
		case "env":
			var env []corev1.EnvVar
			if err = strict(raw, &env); err == nil {
				spec.Env = c.runnerEnv(f, env)
			}
		case "envFrom":
			var from []corev1.EnvFromSource
			if err = strict(raw, &from); err == nil {
				spec.EnvFrom = c.runnerEnvFrom(f, from)
			}
		case "resources":
			err = strict(raw, &spec.Resources)
		case "nodeSelector":
			err = strict(raw, &spec.NodeSelector)
		case "tolerations":
			err = strict(raw, &spec.Tolerations)
		case "affinity":
			err = strict(raw, &spec.Affinity)
		case "volumes":
			err = strict(raw, &spec.Volumes)
			for _, v := range spec.Volumes {
				if v.HostPath != nil || v.GitRepo != nil || v.FlexVolume != nil {
					c.note("runner volume %s reaches the node (hostPath, gitRepo or flexVolume): Landform refuses such a template (RunnerPodTemplateNotAllowed)", v.Name)
				}
			}
		case "volumeMounts":
			err = strict(raw, &spec.VolumeMounts)
		case "initContainers":
			c.unmapped(f, "Landform runner Pods run no init containers: bake what they prepared into the runner image, or use a volume")
		case "hostAliases":
			c.unmapped(f, "Landform runner Pods take no host aliases: use DNS")
		case "priorityClassName":
			c.unmapped(f, "Landform runner Pods take no priority class")
		case "securityContext":
			c.unmapped(f, "Landform sets the runner's security context itself (non-root, read-only root filesystem, no capabilities: Pod Security restricted)")
		default:
			c.unmapped(f, "unknown to landform migrate: nothing was carried over")
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	spec.Env = c.remapHome(field+".spec.volumeMounts", spec.VolumeMounts, spec.Env)
	if len(spec.Env) > 0 {
		var fromSecrets []string
		for _, e := range spec.Env {
			if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
				fromSecrets = append(fromSecrets, e.Name)
			}
		}
		if len(fromSecrets) > 0 {
			c.note("runner env %s come from Secrets or ConfigMaps: the runner Pod reads them itself (tofu-controller read them for it), from its namespace", strings.Join(fromSecrets, ", "))
		}
	}
	if equalTemplate(out, &v1alpha1.RunnerPodTemplate{}) {
		return nil
	}
	c.out.Spec.RunnerPodTemplate = out
	return nil
}

func equalTemplate(a, b *v1alpha1.RunnerPodTemplate) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// keepLabels drops the labels Flux's kustomize-controller sets on what it
// applies: the migrated manifest gets its own when Flux applies it.
func keepLabels(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, "kustomize.toolkit.fluxcd.io/") || strings.HasPrefix(k, "helm.toolkit.fluxcd.io/") {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// keepAnnotations drops kubectl's copy of the last applied object and
// tofu-controller's requests, which mean nothing to Landform.
func keepAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		switch {
		case k == corev1.LastAppliedConfigAnnotation,
			k == "reconcile.fluxcd.io/requestedAt",
			k == "replan.infra.contrib.fluxcd.io/requestedAt",
			strings.HasPrefix(k, "break-the-glass.tf-controller/"),
			strings.HasPrefix(k, Group+"/"):
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// strict decodes raw into v, refusing fields v does not have: a field this
// package does not know must be reported, not lost.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func duration(raw json.RawMessage) (*metav1.Duration, error) {
	var s string
	if err := strict(raw, &s); err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, err
	}
	out := &metav1.Duration{Duration: d}
	if d > 0 && d < time.Second {
		return nil, fmt.Errorf("%q is shorter than Landform accepts (at least 1s)", s)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null"
}

// isZero is true for null, false, 0, "", [] and {}.
func isZero(raw json.RawMessage) bool {
	switch string(compact(raw)) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return true
	}
	return false
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
