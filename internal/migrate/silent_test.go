package migrate

import (
	"strings"
	"testing"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// One test per behaviour change hidden in a mapped field
// (docs/migrating-from-tofu-controller.md, "What changes without a field").

func convertSpec(t *testing.T, spec string, o Options) Result {
	t.Helper()
	srcs, _, err := Decode(strings.NewReader("apiVersion: infra.contrib.fluxcd.io/v1alpha2\nkind: Terraform\nmetadata:\n  name: app\n  namespace: ns\nspec:\n  interval: 1m\n  sourceRef: {kind: GitRepository, name: repo}\n"+spec), "test")
	if err != nil || len(srcs) != 1 {
		t.Fatalf("decoding: %v", err)
	}
	r := Convert(srcs[0], o)
	if r.Object == nil {
		t.Fatalf("refused: %v", r.Refused)
	}
	return r
}

func noteWith(r Result, parts ...string) string {
	for _, n := range r.Notes {
		if containsAll(n, parts) {
			return n
		}
	}
	return ""
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func envOf(r Result) map[string]string {
	env := map[string]string{}
	if t := r.Object.Spec.RunnerPodTemplate; t != nil {
		for _, e := range t.Spec.Env {
			env[e.Name] = e.Value
		}
	}
	return env
}

// M-A: credentials mounted under tofu-controller's HOME are pointed at
// through their variables, never silently unread.
func TestHomeMountsArePointedAt(t *testing.T) {
	r := convertSpec(t, `  runnerPodTemplate:
    spec:
      env:
      - {name: AWS_CONFIG_FILE, value: /etc/aws/config}
      volumes:
      - {name: aws, secret: {secretName: aws}}
      - {name: ssh, secret: {secretName: ssh}}
      - {name: rc, secret: {secretName: rc}}
      - {name: kube, secret: {secretName: kube}}
      - {name: other, secret: {secretName: other}}
      volumeMounts:
      - {name: aws, mountPath: /home/runner/.aws}
      - {name: ssh, mountPath: /home/runner/.ssh/}
      - {name: rc, mountPath: /home/runner/.terraformrc, subPath: terraformrc}
      - {name: kube, mountPath: /home/runner/.kube/config, subPath: config}
      - {name: other, mountPath: /home/runner/notes}
`, Options{})
	env := envOf(r)
	for name, want := range map[string]string{
		"AWS_SHARED_CREDENTIALS_FILE": "/home/runner/.aws/credentials",
		"AWS_CONFIG_FILE":             "/etc/aws/config", // the template's own wins
		"KUBECONFIG":                  "/home/runner/.kube/config",
		"GIT_SSH_COMMAND":             "ssh -i /home/runner/.ssh/id_ed25519 -i /home/runner/.ssh/id_rsa -o UserKnownHostsFile=/home/runner/.ssh/known_hosts",
	} {
		if env[name] != want {
			t.Errorf("%s=%q, want %q (env %v)", name, env[name], want, env)
		}
	}
	for _, parts := range [][]string{
		{"volume aws at /home/runner/.aws", "AWS_SHARED_CREDENTIALS_FILE=/home/runner/.aws/credentials", "no SDK falls back to the Pod's own identity"},
		{"volume rc at /home/runner/.terraformrc is not read", "TF_TOKEN_<host>"},
		{"volume other at /home/runner/notes", "nothing reads it by itself"},
	} {
		if noteWith(r, parts...) == "" {
			t.Errorf("no note with %q in:\n%s", parts, strings.Join(r.Notes, "\n"))
		}
	}
	if _, ok := env["HOME"]; ok {
		t.Errorf("HOME added: %v", env)
	}
}

// M-B: a template the controller's runner policy refuses is reported by
// migrate, with the controller's reason and words.
func TestRefusedTemplateIsReported(t *testing.T) {
	r := convertSpec(t, `  runnerPodTemplate:
    metadata:
      annotations: {container.apparmor.security.beta.kubernetes.io/runner: unconfined}
    spec:
      volumes:
      - {name: scratch, emptyDir: {}}
      volumeMounts:
      - {name: scratch, mountPath: /tmp/scratch}
`, Options{})
	n := noteWith(r, v1alpha1.RunnerPodTemplateNotAllowedReason, "would stall before its first run", "/tmp/scratch", "apparmor")
	if n == "" {
		t.Fatalf("no policy note in:\n%s", strings.Join(r.Notes, "\n"))
	}
	clean := convertSpec(t, "  runnerPodTemplate:\n    spec:\n      nodeSelector: {a: b}\n", Options{})
	if noteWith(clean, v1alpha1.RunnerPodTemplateNotAllowedReason) != "" {
		t.Errorf("an allowed template reported: %v", clean.Notes)
	}
}

// M-C: where vars now win differently against the module's
// *.auto.tfvars, and the tfVarsFiles advice that keeps precedence.
func TestVarsPrecedenceIsReported(t *testing.T) {
	r := convertSpec(t, "  vars:\n  - {name: size, value: \"2\"}\n  tfVarsFiles: [prod.tfvars]\n", Options{})
	if noteWith(r, "landform.auto.tfvars.json", "generated.auto.tfvars.json", "infra.auto.tfvars") == "" {
		t.Errorf("no precedence note in:\n%s", strings.Join(r.Notes, "\n"))
	}
	var advice string
	for _, u := range r.Unmapped {
		if u.Field == "spec.tfVarsFiles" {
			advice = u.Reason
		}
	}
	if !containsAll(advice, []string{"move their values into vars", "sorts after landform.auto.tfvars.json"}) {
		t.Errorf("tfVarsFiles advice: %q", advice)
	}
	if none := convertSpec(t, "", Options{}); noteWith(none, "landform.auto.tfvars.json") != "" {
		t.Errorf("a note without vars: %v", none.Notes)
	}
}

// M-D: approvePlan auto waits for a person's approval of the first plan,
// unless --keep-auto.
func TestAutoApprovalWaitsForTheFirstPlan(t *testing.T) {
	r := convertSpec(t, "  approvePlan: auto\n", Options{})
	if r.Object.Spec.ApprovePlan != "" {
		t.Errorf("approvePlan %q, want manual", r.Object.Spec.ApprovePlan)
	}
	if noteWith(r, "became manual approval for the first apply", "landform approve app", "--keep-auto") == "" {
		t.Errorf("no note in:\n%s", strings.Join(r.Notes, "\n"))
	}
	kept := convertSpec(t, "  approvePlan: auto\n", Options{KeepAuto: true})
	if kept.Object.Spec.ApprovePlan != v1alpha1.ApprovePlanAuto || noteWith(kept, "kept (--keep-auto)") == "" {
		t.Errorf("--keep-auto: approvePlan %q, notes %v", kept.Object.Spec.ApprovePlan, kept.Notes)
	}
}

// M-E and M-G: a ServiceAccount of the source's own is named with what
// it needs; plan.lock true is what Landform does anyway.
func TestServiceAccountAndPlanLock(t *testing.T) {
	r := convertSpec(t, "  serviceAccountName: infra-runner\n  plan: {lock: true}\n", Options{})
	if noteWith(r, "infra-runner is carried over", "must exist in namespace ns", "--enforce-default-service-account") == "" {
		t.Errorf("no ServiceAccount note in:\n%s", strings.Join(r.Notes, "\n"))
	}
	for _, u := range r.Unmapped {
		if u.Field == "spec.plan" {
			t.Errorf("plan.lock true reported as not mapped: %s", u.Reason)
		}
	}
	if !strings.Contains(strings.Join(r.Same, " "), "spec.plan") {
		t.Errorf("plan.lock true not recognised: same %v", r.Same)
	}
}
