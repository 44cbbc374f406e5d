package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/testenv"
)

// A Secret is never read by fields, whatever the spelling of its kind that
// the API server's REST mapper resolves to Secrets: what fields read is
// kept in status.inputs, for anyone who may read Terraform objects. The
// CRD refuses what its rules catch (kind: Secret; after `make generate`
// also secret and Secrets with apiVersion v1); the controller stalls on
// the rest, with a message that names the Secret form, and drops what an
// older controller recorded from it. The password appears nowhere: not in
// status (as read, or base64 as .data holds it), events or the
// controller's log. Fixed to kind: Secret with varsKeys, the object
// applies.
func TestSecretFieldInputsAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	password := "pa55-field-" + hex.EncodeToString(b)
	leaks := []string{password, base64.StdEncoding.EncodeToString([]byte(password))}
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"password": password},
	})).To(Succeed())
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
	path := effectPath(t)

	secretFields := func(apiVersion, kind string) infrav1.VarsReference {
		return infrav1.VarsReference{APIVersion: apiVersion, Kind: kind, Name: "creds",
			Fields: []infrav1.FieldVariable{{Path: ".data.password", Name: "sensitive_content"}}}
	}
	// build is an object on the file module, changed by mutate.
	build := func(name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
		return fileTerraform(ns, name, func(tf *infrav1.Terraform) {
			tf.Spec.Vars = fileVars(path, "public")
			mutate(tf)
		})
	}
	// create creates it; nil when the CRD refuses it, with the message
	// that says what to use instead.
	create := func(name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
		t.Helper()
		tf := build(name, mutate)
		err := k8sClient.Create(ctx, tf)
		if apierrors.IsInvalid(err) {
			g.Expect(err.Error()).To(ContainSubstring("use kind: Secret with varsKeys"), name)
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred(), name)
		return tf
	}

	// kind: Secret takes varsKeys, never fields: the CRD's rule.
	err := k8sClient.Create(ctx, build("exact", func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{secretFields("v1", "Secret")}
	}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "kind: Secret with fields: %v", err)

	// Spellings the REST mapper resolves to Secrets. The CRD's rule, once
	// generated, refuses those with apiVersion v1; none with /v1.
	var refused []*infrav1.Terraform
	for _, tc := range []struct{ name, apiVersion, kind string }{
		{"empty-group", "/v1", "secret"},
		{"empty-group-plural", "/v1", "Secrets"},
		{"lower", "v1", "secret"},
		{"plural", "v1", "Secrets"},
		{"shouting", "v1", "SECRETS"},
	} {
		tf := create(tc.name, func(tf *infrav1.Terraform) {
			tf.Spec.VarsFrom = []infrav1.VarsReference{secretFields(tc.apiVersion, tc.kind)}
		})
		if tf == nil {
			g.Expect(tc.apiVersion).To(Equal("v1"), "%s: refused by the CRD", tc.name)
			continue
		}
		refused = append(refused, tf)
	}
	// An import's id by path, the other reader of fields.
	imported := create("import", func(tf *infrav1.Terraform) {
		tf.Spec.Imports = []infrav1.Import{{To: "landform_file.this", IDFrom: &infrav1.ImportIDReference{
			APIVersion: "v1", Kind: "secret", Name: "creds", Path: ".data.password"}}}
	})
	g.Expect(imported).NotTo(BeNil())
	refused = append(refused, imported)

	// What a controller without the refusal recorded (the field as read:
	// base64) leaves status with the refusal.
	recorded := create("recorded", func(tf *infrav1.Terraform) {
		tf.Spec.Suspend = true
		tf.Spec.VarsFrom = []infrav1.VarsReference{secretFields("/v1", "secret")}
	})
	g.Expect(recorded).NotTo(BeNil())
	g.Eventually(func() error {
		obj := &infrav1.Terraform{}
		if err := k8sClient.Get(ctx, keyOf(ns, "recorded"), obj); err != nil {
			return err
		}
		obj.Status.Inputs = []infrav1.Variable{{Name: "sensitive_content", Value: testenv.JSONValue(leaks[1])}}
		return k8sClient.Status().Update(ctx, obj)
	}).WithTimeout(waitTimeout).Should(Succeed())
	g.Expect(string(mustMarshal(g, get(g, recorded).Status))).To(ContainSubstring(leaks[1]), "recorded")
	updateSpec(t, recorded, func(tf *infrav1.Terraform) { tf.Spec.Suspend = false })
	refused = append(refused, recorded)

	for _, tf := range refused {
		obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
			g.Expect(conditions.IsStalled(obj)).To(BeTrue())
			g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
		})
		g.Expect(conditions.GetReason(obj, meta.StalledCondition)).To(Equal(infrav1.InvalidInputPathReason), tf.Name)
		g.Expect(readyReasonOf(obj)).To(Equal(infrav1.InvalidInputPathReason), tf.Name)
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("/creds: a Secret's fields are never read"), tf.Name)
		g.Expect(readyMessageOf(obj)).To(ContainSubstring("use kind: Secret with varsKeys instead"), tf.Name)
		g.Expect(kstatusOf(g, obj)).To(Equal(kstatus.FailedStatus), "%s: a health check ends", tf.Name)
		g.Expect(obj.Status.Plan).To(BeNil(), "%s: nothing planned", tf.Name)
		g.Expect(obj.Status.Inputs).To(BeEmpty(), tf.Name)
		status := mustMarshal(g, obj.Status)
		for _, leak := range leaks {
			g.Expect(string(status)).NotTo(ContainSubstring(leak), "%s: status", tf.Name)
		}
	}

	// Fixed the way the message says: applied with the password, which
	// still appears nowhere.
	fixed := refused[0]
	g.Expect(fixed.Name).To(Equal("empty-group"))
	updateSpec(t, fixed, func(tf *infrav1.Terraform) {
		tf.Spec.Imports = nil
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds", VarsKeys: []string{"password:sensitive_content"}}}
	})
	obj := waitReady(t, fixed)
	g.Expect(kstatusOf(g, obj)).To(Equal(kstatus.CurrentStatus))
	g.Expect(readFile(path)).To(HaveSuffix(password), "the value did its job")
	g.Expect(obj.Status.Inputs).To(BeEmpty())
	status := mustMarshal(g, obj.Status)

	events := eventsIn(g, ns)
	g.Expect(events).NotTo(BeEmpty())
	for _, leak := range leaks {
		g.Expect(string(status)).NotTo(ContainSubstring(leak), "status once fixed")
		for _, e := range events {
			g.Expect(e.Message).NotTo(ContainSubstring(leak), "event %s about %s", e.Reason, e.InvolvedObject.Name)
			for _, v := range e.Annotations {
				g.Expect(v).NotTo(ContainSubstring(leak), "event annotation")
			}
		}
		g.Expect(controllerLogs.String()).NotTo(ContainSubstring(leak), "controller log")
	}
}

// The REST mapper, not the spelling, decides what is a Secret: the
// spellings that resolve to core Secrets are refused before anything is
// read, and other kinds (served or not) are left to the read.
func TestSecretInputKindsByMapper(t *testing.T) {
	ctx := context.Background()
	r := &inputs.Resolver{Reader: k8sClient, Mapper: k8sClient.RESTMapper()}
	for _, tc := range []struct {
		apiVersion, kind string
		secret           bool
	}{
		{"v1", "secret", true},
		{"v1", "Secrets", true},
		{"v1", "sEcReTs", true},
		{"/v1", "secret", true},
		{"v1", "Service", false},
		{"v1", "service", false},
		{"apps/v1", "Deployment", false},
		{"example.com/v1", "Secret", false},
		{"v1", "Secretive", false},
	} {
		t.Run(tc.apiVersion+" "+tc.kind, func(t *testing.T) {
			g := NewWithT(t)
			tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tf"}}
			tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "creds",
				Fields: []infrav1.FieldVariable{{Path: ".data.password", Name: "p"}}}}
			_, err := r.Vars(ctx, tf, inputs.Plan)
			if !tc.secret {
				// Not found, or not served: the read says so.
				g.Expect(err).NotTo(MatchError(inputs.ErrSecretInput))
				return
			}
			g.Expect(err).To(MatchError(inputs.ErrSecretInput), "refused before the read")
			o := outcome.Of(err, "")
			g.Expect(o.Kind).To(Equal(outcome.Stalled))
			g.Expect(o.Reason).To(Equal(infrav1.InvalidInputPathReason))
		})
	}
}

func mustMarshal(g Gomega, v any) []byte {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}

// kstatusOf is what a Flux health check makes of obj.
func kstatusOf(g Gomega, obj *infrav1.Terraform) kstatus.Status {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: m})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}
