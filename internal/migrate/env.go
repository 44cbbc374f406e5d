package migrate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// What the runner's environment (runnerPodTemplate.spec.env and envFrom)
// did under tofu-controller, and does under Landform.
//
// tofu-controller's runner hands its whole environment to terraform-exec's
// SetEnv, which refuses the variables terraform-exec manages itself (every
// release since terraform-exec v0.13, and tofu-controller's fork of it):
// the run fails before init with `manual setting of env var "TF_VAR_x"
// detected`. Landform's runner leaves the same names out of the engine's
// environment (runner/server/environment.go, engineManaged), and also the
// CLI configuration, plugin cache and data dir, which tofu-controller
// passed on. A TF_VAR_ entry says which value a module variable should
// have, so it becomes vars or varsFrom; every other left-out name is
// reported.

// refusedByTerraformExec is terraform-exec's prohibited environment
// (tfexec.ProhibitedEnv), the names both runners keep from the engine.
var refusedByTerraformExec = map[string]string{
	"TF_CLI_ARGS":             "Landform passes no extra command-line arguments",
	"TF_INPUT":                "the runner never asks for input",
	"TF_IN_AUTOMATION":        "the runner sets it itself",
	"TF_LOG":                  "Landform turns no engine debug logging on; the run's log (landform logs NAME) has the engine's output",
	"TF_LOG_CORE":             "Landform turns no engine debug logging on; the run's log (landform logs NAME) has the engine's output",
	"TF_LOG_PATH":             "Landform turns no engine debug logging on; the run's log (landform logs NAME) has the engine's output",
	"TF_LOG_PROVIDER":         "Landform turns no engine debug logging on; the run's log (landform logs NAME) has the engine's output",
	"TF_REATTACH_PROVIDERS":   "the runner starts the providers itself",
	"TF_APPEND_USER_AGENT":    "the runner sets the user agent",
	"TF_WORKSPACE":            "set spec.workspace instead",
	"TF_DISABLE_PLUGIN_TLS":   "the runner starts the providers itself",
	"TF_SKIP_PROVIDER_VERIFY": "providers are verified against the dependency lock file",
}

// refusedPrefixes are terraform-exec's prohibited prefixes (TF_VAR_ is
// mapped instead).
var refusedPrefixes = map[string]string{
	"TF_CLI_ARGS_": "Landform passes no extra command-line arguments",
}

// droppedByLandform are names tofu-controller passed on and Landform's
// runner replaces with its own.
var droppedByLandform = map[string]string{
	"TF_CLI_CONFIG_FILE":  "Landform's runner writes its own CLI configuration (the operator's provider mirrors, --provider-mirror) and reads no other: ask the operator to mirror the providers, or put registry credentials in TF_TOKEN_<host>",
	"TERRAFORM_CONFIG":    "Landform's runner writes its own CLI configuration (the operator's provider mirrors, --provider-mirror) and reads no other: ask the operator to mirror the providers, or put registry credentials in TF_TOKEN_<host>",
	"TF_PLUGIN_CACHE_DIR": "Landform's runners share no plugin cache (concurrent runners writing one corrupt it): providers come from the operator's mirrors (--provider-mirror) or their registries",
	"TF_DATA_DIR":         "the runner keeps the module's .terraform directory in its own workspace",
	"HOME":                "the runner sets HOME to a directory of its own",
}

// engineVersionEnv are names that look as if they chose the engine's
// version. tofu-controller's runner ran the binary its image held
// (terraform, else tofu, on PATH) and read none of them; in its Dockerfiles
// TF_VERSION and TOFU_VERSION are build arguments.
var engineVersionEnv = map[string]string{
	"TF_VERSION":              engineTerraform,
	"TERRAFORM_VERSION":       engineTerraform,
	"TFENV_TERRAFORM_VERSION": engineTerraform,
	"TOFU_VERSION":            engineOpenTofu,
	"TOFUENV_TOFU_VERSION":    engineOpenTofu,
}

const tfVarPrefix = "TF_VAR_"

// tfVar is a module variable that a TF_VAR_ entry of the runner's
// environment names.
type tfVar struct {
	// from is the entry, for the report: "TF_VAR_x", or "envFrom Secret s".
	from string
	// name is the variable; empty for an envFrom entry (every key).
	name string
	// value is a literal value; nil when ref is set.
	value *string
	// ref reads the value from a Secret or ConfigMap.
	ref *v1alpha1.VarsReference
}

// runnerEnv keeps the entries of env that Landform's runner passes on, and
// turns TF_VAR_ entries into variables (placed by finishVars).
func (c *converter) runnerEnv(field string, env []corev1.EnvVar) []corev1.EnvVar {
	// Kubernetes lets the last entry of a name win.
	last := map[string]int{}
	for i, e := range env {
		last[e.Name] = i
	}
	var kept []corev1.EnvVar
	for i, e := range env {
		if last[e.Name] != i {
			continue
		}
		f := field + " " + e.Name
		if name, ok := strings.CutPrefix(e.Name, tfVarPrefix); ok {
			c.envVariable(f, name, e)
			continue
		}
		if reason, ok := refusedEnv(e.Name); ok {
			c.unmapped(f, "tofu-controller's runner refused to run with it (terraform-exec: manual setting of env var), and Landform's runner keeps it from the engine: "+reason)
			continue
		}
		if reason, ok := droppedByLandform[e.Name]; ok {
			c.unmapped(f, reason)
			continue
		}
		if engine, ok := engineVersionEnv[e.Name]; ok && e.Value != "" {
			c.engineEnv = append(c.engineEnv, engineEnv{name: e.Name, engine: engine, version: e.Value})
		}
		kept = append(kept, e)
	}
	return kept
}

func refusedEnv(name string) (string, bool) {
	if reason, ok := refusedByTerraformExec[name]; ok {
		return reason, true
	}
	for p, reason := range refusedPrefixes {
		if strings.HasPrefix(name, p) {
			return reason, true
		}
	}
	return "", false
}

// envVariable maps TF_VAR_<name>.
func (c *converter) envVariable(field, name string, e corev1.EnvVar) {
	if !variablePattern.MatchString(name) {
		c.unmapped(field, fmt.Sprintf("%q is not a terraform variable name", name))
		return
	}
	v := tfVar{from: e.Name, name: name}
	switch src := e.ValueFrom; {
	case src == nil:
		if strings.Contains(e.Value, "$(") {
			c.unmapped(field, "its value refers to other variables ($(NAME)), which Kubernetes expanded in the Pod: write the value into spec.vars yourself")
			return
		}
		value := e.Value
		v.value = &value
	case src.SecretKeyRef != nil:
		v.ref = &v1alpha1.VarsReference{Kind: "Secret", Name: src.SecretKeyRef.Name, Optional: isTrue(src.SecretKeyRef.Optional),
			VarsKeys: []string{src.SecretKeyRef.Key + ":" + name}}
	case src.ConfigMapKeyRef != nil:
		v.ref = &v1alpha1.VarsReference{Kind: "ConfigMap", Name: src.ConfigMapKeyRef.Name, Optional: isTrue(src.ConfigMapKeyRef.Optional),
			VarsKeys: []string{src.ConfigMapKeyRef.Key + ":" + name}}
	default:
		c.unmapped(field, "it reads a field of the runner Pod, which Landform cannot read into a variable: write the value into spec.vars yourself")
		return
	}
	c.tfVars = append(c.tfVars, v)
}

// runnerEnvFrom keeps the envFrom entries Landform's runner passes on: one
// with the prefix TF_VAR_ sets a variable per key, and becomes varsFrom.
func (c *converter) runnerEnvFrom(field string, from []corev1.EnvFromSource) []corev1.EnvFromSource {
	var kept []corev1.EnvFromSource
	for i, e := range from {
		f := fmt.Sprintf("%s[%d]", field, i)
		ref := envFromRef(e)
		switch {
		case e.Prefix == tfVarPrefix && ref != nil:
			c.tfVars = append(c.tfVars, tfVar{from: "envFrom " + ref.Kind + " " + ref.Name + " (prefix " + tfVarPrefix + ")", ref: ref})
			continue
		case strings.HasPrefix(e.Prefix, tfVarPrefix):
			c.unmapped(f, fmt.Sprintf("every key becomes a variable named %s<key>, and Landform's runner keeps TF_VAR_* from the engine (tofu-controller's refused to run with them): list the keys as varsFrom varsKeys key:%s<key>",
				strings.TrimPrefix(e.Prefix, tfVarPrefix), strings.TrimPrefix(e.Prefix, tfVarPrefix)))
			continue
		}
		if reason, ok := refusedEnv(e.Prefix); ok && e.Prefix != "" {
			c.unmapped(f, "its prefix "+e.Prefix+" makes every key a variable that tofu-controller's runner refused to run with and Landform's keeps from the engine: "+reason)
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

func envFromRef(e corev1.EnvFromSource) *v1alpha1.VarsReference {
	switch {
	case e.SecretRef != nil:
		return &v1alpha1.VarsReference{Kind: "Secret", Name: e.SecretRef.Name, Optional: isTrue(e.SecretRef.Optional)}
	case e.ConfigMapRef != nil:
		return &v1alpha1.VarsReference{Kind: "ConfigMap", Name: e.ConfigMapRef.Name, Optional: isTrue(e.ConfigMapRef.Optional)}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// finishVars places the TF_VAR_ variables once vars and varsFrom are
// known. TF_VAR_ is terraform's weakest input: a variable that vars or
// varsFrom also set took their value, so it is left out; the others keep
// the value they name, literal ones in vars, the rest in varsFrom before
// the source's own entries (later entries win, as varsFrom won over
// TF_VAR_).
func (c *converter) finishVars() {
	if len(c.tfVars) == 0 {
		return
	}
	set := map[string]string{} // variable → where the source sets it
	for _, n := range c.src.varNames() {
		set[n] = "spec.vars"
	}
	allKeys := []string{}
	for _, r := range c.src.varsFromRefs() {
		if len(r.VarsKeys) == 0 {
			allKeys = append(allKeys, r.Kind+" "+r.Name)
		}
		for _, k := range r.VarsKeys {
			_, name, found := strings.Cut(k, ":")
			if !found {
				name = k
			}
			set[name] = "spec.varsFrom (" + r.Kind + " " + r.Name + ")"
		}
	}

	var literal, fromRefs []string
	var refs []v1alpha1.VarsReference
	var jsonLike []string
	for _, v := range c.tfVars {
		if where, ok := set[v.name]; ok && v.name != "" {
			c.unmapped("spec.runnerPodTemplate.spec.env "+v.from, fmt.Sprintf("%s sets %s too, and its value won over %s in terraform: it is left out", where, v.name, v.from))
			continue
		}
		if v.value != nil {
			c.out.Spec.Vars = append(c.out.Spec.Vars, v1alpha1.Variable{Name: v.name, Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(*v.value))}})
			literal = append(literal, v.from+" → vars "+v.name)
			if t := strings.TrimSpace(*v.value); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
				jsonLike = append(jsonLike, v.name)
			}
			continue
		}
		refs = mergeRef(refs, *v.ref)
		if v.name == "" {
			fromRefs = append(fromRefs, v.from+" → varsFrom "+v.ref.Kind+" "+v.ref.Name+" (every key)")
		} else {
			fromRefs = append(fromRefs, fmt.Sprintf("%s → varsFrom %s %s key %s", v.from, v.ref.Kind, v.ref.Name, strings.TrimSuffix(v.ref.VarsKeys[0], ":"+v.name)))
		}
	}
	c.out.Spec.VarsFrom = append(refs, c.out.Spec.VarsFrom...)
	mapped := append(literal, fromRefs...)
	if len(mapped) == 0 {
		return
	}
	c.note("runner env TF_VAR_* set module variables, which Landform's runner keeps from the engine: %s. "+
		"tofu-controller never ran with them (its runner refuses TF_VAR_*: \"manual setting of env var\", so its runs failed while they were set): the first plan is the first with these values, review it",
		strings.Join(mapped, ", "))
	c.note("TF_VAR_* were terraform's weakest input: a terraform.tfvars or *.auto.tfvars file of the module that sets the same variable won over them, while Landform's vars and varsFrom win over such a file (but for *.auto.tfvars named after landform.auto.tfvars.json): check that the module's files set none of these variables")
	if len(literal) > 0 && len(allKeys) > 0 {
		c.note("varsFrom reads every key of %s: a key named like a TF_VAR_ variable now in vars won over it in tofu-controller's terraform, and loses to vars in Landform: check that none is", strings.Join(allKeys, ", "))
	}
	if len(jsonLike) > 0 {
		c.note("TF_VAR_ values of %s look like a list or an object: terraform parsed them as one for a variable of such a type, Landform passes the string: write them as a list or object in vars if the variables are not strings", strings.Join(jsonLike, ", "))
	}
	if len(refs) > 0 {
		c.note("a TF_VAR_ value read from a Secret or ConfigMap that is a JSON object or list is passed by Landform as that object or list, as terraform parsed it for a variable of such a type; a variable of type string gets an error instead of the text: check that no such value is meant as a string")
	}
}

// mergeRef adds one key of ref to refs, into an entry for the same object.
func mergeRef(refs []v1alpha1.VarsReference, ref v1alpha1.VarsReference) []v1alpha1.VarsReference {
	i := slices.IndexFunc(refs, func(r v1alpha1.VarsReference) bool {
		return r.Kind == ref.Kind && r.Name == ref.Name && r.Optional == ref.Optional && (len(r.VarsKeys) == 0) == (len(ref.VarsKeys) == 0)
	})
	if i < 0 || len(ref.VarsKeys) == 0 {
		return append(refs, ref)
	}
	refs[i].VarsKeys = append(refs[i].VarsKeys, ref.VarsKeys...)
	return refs
}
