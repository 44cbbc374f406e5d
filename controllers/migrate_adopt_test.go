package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
)

// adoptModule creates one terraform_data whose create provisioner appends
// a line to var.effect: the file counts how many times it was created.
const adoptModule = `
variable "size" { type = number }
variable "tier" { type = string }
variable "effect" { type = string }

resource "terraform_data" "db" {
  input = { size = var.size, tier = var.tier }
  provisioner "local-exec" {
    command = "echo created >> ${var.effect}"
  }
}

output "db_id" { value = terraform_data.db.id }
output "tier" { value = var.tier }
`

// tofuControllerApply runs the real tofu on module the way tofu-controller's
// runner does: its kubernetes backend block (generated_backend_config.tf,
// as tofu-controller writes it, here reaching the suite's API server
// through a kubeconfig instead of in-cluster), its variables file
// (generated.auto.tfvars.json: vars as given, varsFrom values as strings),
// the workspace created when it is not "default", then apply.
func tofuControllerApply(t *testing.T, ns, secretSuffix, workspace, module string, vars map[string]any) {
	t.Helper()
	dir := t.TempDir()
	backend := fmt.Sprintf(`
terraform {
  backend "kubernetes" {
    secret_suffix     = %q
    in_cluster_config = false
    config_path       = %q
    namespace         = %q
    labels            = {
      
    }
  }
}
`, secretSuffix, testKubeconfig, ns)
	varsJSON, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"main.tf":                     module,
		"generated_backend_config.tf": backend,
		"generated.auto.tfvars.json":  string(varsJSON),
		"cli.tfrc":                    "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tofu := func(args ...string) {
		t.Helper()
		cmd := exec.Command(tofuPath, append(args, "-no-color")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "TF_IN_AUTOMATION=1", "HOME="+dir, "CHECKPOINT_DISABLE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tofu("init", "-input=false")
	if workspace != "default" {
		tofu("workspace", "new", workspace)
	}
	tofu("apply", "-auto-approve", "-input=false")
}

// readState reads the state the kubernetes backend keeps in Secret name.
func readState(g Gomega, ns, name string) testenv.State {
	data := secretData(g, ns, name)
	g.Expect(data).NotTo(BeNil(), "state Secret %s/%s", ns, name)
	st, err := testenv.ReadState(data)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

// dataID is the id of the state's one terraform_data.
func dataID(s testenv.State) string {
	for _, r := range s.Resources {
		if r.Type == "terraform_data" && len(r.Instances) == 1 {
			return r.Instances[0].Attributes.ID
		}
	}
	return ""
}

// A tofu-controller object's state, made by the real engine with
// tofu-controller's backend configuration and secret naming, is adopted by
// the object `landform migrate` writes: its first plan has no changes,
// nothing is created again, the outputs come from the existing state, and
// deleting it (Orphan, tofu-controller's behaviour) keeps the state.
func TestMigratedObjectAdoptsTofuControllerState(t *testing.T) {
	tests := []struct {
		name, workspace, secretSuffix string
	}{
		{name: "default naming", workspace: "default"},
		{name: "secretSuffix and workspace", workspace: "prod", secretSuffix: "legacy-db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			newGitRepository(t, ns, "repo", artifacts.publish(map[string]string{"modules/db/main.tf": adoptModule}))
			g.Expect(k8sClient.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-settings"},
				Data:       map[string][]byte{"tier_name": []byte("gold")},
			})).To(Succeed())
			effect := effectPath(t)

			// The object as it was in Git for tofu-controller.
			backend := ""
			if tt.secretSuffix != "" {
				backend = fmt.Sprintf("  backendConfig:\n    secretSuffix: %s\n  workspace: %s\n", tt.secretSuffix, tt.workspace)
			}
			manifest := fmt.Sprintf(`apiVersion: infra.contrib.fluxcd.io/v1alpha2
kind: Terraform
metadata:
  name: database
  namespace: %s
spec:
  interval: 1h
  retryInterval: 2s
  approvePlan: auto
  path: ./modules/db
  sourceRef:
    kind: GitRepository
    name: repo
%s  vars:
  - name: size
    value: 20
  - name: effect
    value: %q
  varsFrom:
  - kind: Secret
    name: db-settings
    varsKeys:
    - tier_name:tier
  writeOutputsToSecret:
    name: database-outputs
`, ns, backend, effect)

			// tofu-controller applied it: its state Secret is
			// tfstate-<workspace>-<secretSuffix, default the name>.
			suffix := tt.secretSuffix
			if suffix == "" {
				suffix = "database"
			}
			stateSecret := "tfstate-" + tt.workspace + "-" + suffix
			tofuControllerApply(t, ns, suffix, tt.workspace, adoptModule, map[string]any{"size": 20, "effect": effect, "tier": "gold"})
			before := readState(g, ns, stateSecret)
			g.Expect(dataID(before)).NotTo(BeEmpty())
			g.Expect(readFile(effect)).To(Equal("created\n"))

			file := filepath.Join(t.TempDir(), "terraform.yaml")
			g.Expect(os.WriteFile(file, []byte(manifest), 0o600)).To(Succeed())
			stdout, stderr, err := runCLI(ns, "migrate", "-f", file)
			g.Expect(err).NotTo(HaveOccurred(), stderr)
			g.Expect(stderr).To(ContainSubstring("adopts Secret " + stateSecret + " in " + ns))
			g.Expect(stderr).To(ContainSubstring("WARNING: tofu-controller KEEPS"))
			tf := &infrav1.Terraform{}
			g.Expect(yaml.UnmarshalStrict([]byte(strings.TrimPrefix(stdout, "---\n")), tf)).To(Succeed(), stdout)
			g.Expect(tf.Spec.DeletionPolicy).To(Equal(infrav1.DeletionPolicyOrphan))
			g.Expect(names.StateSecret(tf)).To(Equal(stateSecret))
			g.Expect(k8sClient.Create(ctx, tf)).To(Succeed())

			obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
				g.Expect(obj.Status.Plan).NotTo(BeNil())
				g.Expect(obj.Status.Plan.ID).NotTo(BeEmpty())
				g.Expect(obj.Status.AvailableOutputs).To(ContainElement("db_id"))
			})
			g.Expect(obj.Status.Plan.Add).To(BeZero(), describe(obj))
			g.Expect(obj.Status.Plan.Change).To(BeZero(), describe(obj))
			g.Expect(obj.Status.Plan.Destroy).To(BeZero(), describe(obj))
			g.Expect(obj.Status.Plan.Resources).To(BeEmpty(), describe(obj))
			g.Expect(obj.Status.Plan.Pending).To(BeEmpty(), describe(obj))

			after := readState(g, ns, stateSecret)
			g.Expect(after.Lineage).To(Equal(before.Lineage))
			g.Expect(dataID(after)).To(Equal(dataID(before)), "terraform_data was replaced")
			g.Expect(readFile(effect)).To(Equal("created\n"), "created again")
			g.Eventually(func(g Gomega) {
				out := secretData(g, ns, "database-outputs")
				g.Expect(string(out["db_id"])).To(Equal(dataID(before)))
				g.Expect(string(out["tier"])).To(Equal("gold"))
			}).WithTimeout(waitTimeout).WithPolling(pollEvery).Should(Succeed())

			// Orphan: deleting the migrated object keeps the state.
			deleteAndWait(t, tf)
			g.Expect(dataID(readState(g, ns, stateSecret))).To(Equal(dataID(before)))
			g.Expect(readFile(effect)).To(Equal("created\n"))
		})
	}
}
