package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/source"
)

// minKubernetes is the oldest Kubernetes Landform supports (README).
const minKubernetes = "1.29.0"

// alertCRD is notification-controller's Alert CRD, whose event source
// kinds are an enum that must be patched to take Terraform
// (docs/notifications.md).
const alertCRD = "alerts.notification.toolkit.fluxcd.io"

// errCheckFailed ends check with exit code 1 once every line is printed;
// errChecksFailed once -o has printed every check.
var (
	errCheckFailed  = errors.New("check failed: see the lines marked ✗")
	errChecksFailed = errors.New("check failed: see the checks with status fail")
)

func (a *app) checkCommand() *cobra.Command {
	var pre bool
	var output string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the cluster's prerequisites and the Landform installation, like flux check",
		Long: "Check the prerequisites (the Kubernetes version, Flux's source kinds; Flux's\n" +
			"kustomize, helm and notification APIs are optional) and, without --pre, the\n" +
			"installation: the Terraform CRD, the controller Deployments and their images,\n" +
			"the runner ServiceAccount in every namespace with Terraform objects, whether\n" +
			"events reach notification-controller, and whether Flux Alerts accept kind\n" +
			"Terraform. Each line is marked ✔ (passed), ⚠ (optional, or worth a look) or\n" +
			"✗ (failed); the command exits with 1 when a line is ✗. -o json|yaml prints\n" +
			"the checks as a list of name, status (ok, warn, fail or info) and message.",
		Example: a.examples("check", "--pre", "", "-o json | jq -r '.[] | select(.status == \"fail\") | .message'"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runCheck(cmd.Context(), pre, output)
		},
	}
	cmd.Flags().BoolVar(&pre, "pre", false, "check only the prerequisites, before installing Landform")
	a.outputFlag(cmd, &output, "print the checks as json or yaml")
	return cmd
}

// Statuses of a check, as -o prints them.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	// checkInfo: what was found, neither good nor bad (an image).
	checkInfo = "info"
)

// checkResult is one check as -o prints it.
type checkResult struct {
	// Name says what was checked, and is the same from one run to the
	// next: "kubernetes", "source/GitRepository",
	// "runner-serviceaccount/team-a/tf-runner".
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// checker prints each check as it is made (without -o), keeps them for -o,
// and remembers whether one failed.
type checker struct {
	// w takes the lines; nil with -o.
	w      io.Writer
	checks []checkResult
	failed bool
}

// marks are the text form's marks of each status.
var marks = map[string]string{checkOK: "✔", checkWarn: "⚠", checkFail: "✗", checkInfo: "►"}

func (c *checker) add(name, status, format string, args ...any) {
	r := checkResult{Name: name, Status: status, Message: fmt.Sprintf(format, args...)}
	c.checks = append(c.checks, r)
	c.line(marks[status], r.Message)
	if status == checkFail {
		c.failed = true
	}
}

// line prints a line of the text form only.
func (c *checker) line(mark, message string) {
	if c.w != nil {
		fmt.Fprintf(c.w, "%s %s\n", mark, message)
	}
}

func (c *checker) section(title string) { c.line(marks[checkInfo], title) }

func (c *checker) info(name, format string, args ...any)    { c.add(name, checkInfo, format, args...) }
func (c *checker) success(name, format string, args ...any) { c.add(name, checkOK, format, args...) }
func (c *checker) warning(name, format string, args ...any) { c.add(name, checkWarn, format, args...) }
func (c *checker) failure(name, format string, args ...any) { c.add(name, checkFail, format, args...) }

// verdict ends a section with the line that sums it up, and returns the
// error that ends check when a check failed.
func (c *checker) verdict(passed, failed string) error {
	switch {
	case !c.failed:
		c.line(marks[checkOK], passed)
		return nil
	case c.w == nil:
		return errChecksFailed
	}
	c.line(marks[checkFail], failed)
	return errCheckFailed
}

func (a *app) runCheck(ctx context.Context, pre bool, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	s, err := a.connect()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
	if err != nil {
		return err
	}
	c := &checker{}
	if output == "" {
		c.w = a.Streams.Out
	}
	err = s.check(ctx, c, dc, pre)
	if output == "" || err != nil && !errors.Is(err, errChecksFailed) {
		return err
	}
	return printResult(a.Streams.Out, output, c.checks, err)
}

// check makes the checks, prerequisites first, and returns errChecksFailed
// or errCheckFailed when one failed.
func (s *session) check(ctx context.Context, c *checker, dc discovery.DiscoveryInterface, pre bool) error {
	c.section("checking prerequisites")
	if err := s.checkKubernetes(c, dc); err != nil {
		return err
	}
	s.checkSources(c, dc)
	for _, api := range []struct{ group, kind, what string }{
		{"kustomize.toolkit.fluxcd.io", "Kustomization", "for spec.dependsOn on Kustomizations"},
		{"helm.toolkit.fluxcd.io", "HelmRelease", "for spec.dependsOn on HelmReleases"},
		{"notification.toolkit.fluxcd.io", "Alert", "for Flux Alerts on Terraform objects"},
	} {
		name := "api/" + api.kind
		if v := servedVersions(dc, api.group, api.kind); len(v) > 0 {
			c.success(name, "%s %s (%s)", api.kind, strings.Join(v, ", "), api.group)
		} else {
			c.warning(name, "%s not served (%s; optional, %s)", api.kind, api.group, api.what)
		}
	}
	if err := c.verdict("prerequisites checks passed", "prerequisites checks failed"); err != nil || pre {
		return err
	}

	c.section("checking the Landform installation")
	versions := servedVersions(dc, v1alpha1.GroupVersion.Group, v1alpha1.TerraformKind)
	if len(versions) == 0 {
		c.failure("crd/"+resTerraforms, "%s is not served: install Landform as the README's \"Install\" section says", resTerraforms)
	} else {
		c.success("crd/"+resTerraforms, "%s (served: %s)", resTerraforms, strings.Join(versions, ", "))
	}
	defaultAccount, eventsAddr := s.checkControllers(ctx, c)
	if len(versions) > 0 {
		s.checkRunnerAccounts(ctx, c, defaultAccount)
	}
	switch {
	case eventsAddr == nil:
	case *eventsAddr == "":
		c.warning("events-addr", "--events-addr not set: events go to Kubernetes only, Flux Alerts do not see them (docs/notifications.md)")
	default:
		c.success("events-addr", "--events-addr=%s: events go to notification-controller too", *eventsAddr)
	}
	s.checkAlertKind(ctx, c)
	return c.verdict("all checks passed", "check failed")
}

func (s *session) checkKubernetes(c *checker, dc discovery.DiscoveryInterface) error {
	info, err := dc.ServerVersion()
	if err != nil {
		return s.explain(err, "get", "version", "version", "", "")
	}
	v, err := version.ParseGeneric(info.GitVersion)
	switch {
	case err != nil:
		c.failure("kubernetes", "Kubernetes version %q cannot be read", info.GitVersion)
	case !v.AtLeast(version.MustParseGeneric(minKubernetes)):
		c.failure("kubernetes", "Kubernetes %s is older than %s: upgrade the cluster", v, minKubernetes)
	default:
		c.success("kubernetes", "Kubernetes %s >=%s", v, minKubernetes)
	}
	return nil
}

// checkSources reports the Flux source kinds served, at the version the
// controller reads them at: it needs at least one.
func (s *session) checkSources(c *checker, dc discovery.DiscoveryInterface) {
	var served source.Served
	if _, err := served.Discover(dc); err != nil {
		c.failure("sources", "Flux source kinds: %v", err)
		return
	}
	servedAny := false
	for _, kind := range source.Kinds {
		gvk, err := served.Lookup(kind)
		if err != nil {
			c.warning("source/"+kind, "%s not served at %s/%s or %s: objects using it stay Stalled", kind, sourcev1.GroupVersion.Group, source.Versions[0], source.Versions[1])
			continue
		}
		servedAny = true
		c.success("source/"+kind, "%s %s (%s)", kind, gvk.Version, gvk.Group)
	}
	if !servedAny {
		c.failure("sources", "no Flux source kind is served: install Flux (source-controller) first")
	}
}

// servedVersions are the versions of group at which the API server
// serves kind, the group's preferred version first.
func servedVersions(dc discovery.DiscoveryInterface, group, kind string) []string {
	groups, err := dc.ServerGroups()
	if err != nil {
		return nil
	}
	var versions []string
	for _, g := range groups.Groups {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			list, err := dc.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range list.APIResources {
				if r.Kind == kind && !strings.Contains(r.Name, "/") {
					versions = append(versions, v.Version)
				}
			}
		}
	}
	return versions
}

// checkControllers reports each controller Deployment and returns the
// runner ServiceAccount default and the events address their manager
// containers are given (nil when no Deployment was found).
func (s *session) checkControllers(ctx context.Context, c *checker) (string, *string) {
	defaultAccount := (&v1alpha1.Terraform{}).GetServiceAccountName()
	var list appsv1.DeploymentList
	if err := s.c.List(ctx, &list, client.MatchingLabels{nameLabel: nameValue, componentLabel: controllerValue}); err != nil {
		c.failure("controller", "%v", s.explain(err, "list", resDeployments, "Deployment", "", ""))
		return defaultAccount, nil
	}
	if len(list.Items) == 0 {
		c.failure("controller", "no controller Deployment (labelled %s) in any namespace", ControllerSelector)
		return defaultAccount, nil
	}
	var eventsAddr *string
	for _, d := range list.Items {
		which := d.Namespace + "/" + d.Name
		if deploymentAvailable(&d) {
			c.success("deployment/"+which, "Deployment %s: %d/%d available", which, d.Status.AvailableReplicas, d.Status.Replicas)
		} else {
			c.failure("deployment/"+which, "Deployment %s: not available (%d/%d replicas): kubectl -n %s describe deployment %s", which, d.Status.AvailableReplicas, d.Status.Replicas, d.Namespace, d.Name)
		}
		c.info("image/"+which, "%s", managerImage(d.Spec.Template.Spec.Containers))
		args := managerArgs(d.Spec.Template.Spec.Containers)
		if v, ok := flagValue(args, "default-service-account"); ok {
			defaultAccount = v
		}
		v, _ := flagValue(args, "events-addr")
		if eventsAddr == nil || v != "" {
			eventsAddr = &v
		}
	}
	return defaultAccount, eventsAddr
}

// deploymentAvailable says whether d's current generation has an
// available replica.
func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas == 0 {
		return false
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return true
}

// managerArgs are the command and arguments of the manager container
// (or the first container's).
func managerArgs(containers []corev1.Container) []string {
	if len(containers) == 0 {
		return nil
	}
	m := containers[0]
	for _, c := range containers {
		if c.Name == "manager" {
			m = c
		}
	}
	return append(slices.Clone(m.Command), m.Args...)
}

// flagValue finds --name=value or --name value in args; the last wins,
// as with Go's flag package.
func flagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for i, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--"+name+"="):
			value, found = strings.TrimPrefix(arg, "--"+name+"="), true
		case arg == "--"+name && i+1 < len(args):
			value, found = args[i+1], true
		}
	}
	return value, found
}

// checkRunnerAccounts checks that the ServiceAccount runner Pods run as
// exists in every namespace with Terraform objects.
func (s *session) checkRunnerAccounts(ctx context.Context, c *checker, defaultAccount string) {
	var list v1alpha1.TerraformList
	if err := s.c.List(ctx, &list); err != nil {
		c.failure("runner-serviceaccounts", "%v", s.explain(err, "list", resTerraforms, "Terraform", "", ""))
		return
	}
	// namespace/account → how many objects run as it
	uses := map[[2]string]int{}
	for _, obj := range list.Items {
		account := obj.Spec.ServiceAccountName
		if account == "" {
			account = defaultAccount
		}
		uses[[2]string{obj.Namespace, account}]++
	}
	keys := make([][2]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]string) int { return strings.Compare(x[0]+"/"+x[1], y[0]+"/"+y[1]) })
	if len(keys) == 0 {
		c.success("runner-serviceaccounts", "no Terraform objects yet: no runner ServiceAccount to check (default %s)", defaultAccount)
	}
	for _, k := range keys {
		name := "runner-serviceaccount/" + k[0] + "/" + k[1]
		err := s.c.Get(ctx, client.ObjectKey{Namespace: k[0], Name: k[1]}, &corev1.ServiceAccount{})
		switch {
		case err == nil:
			c.success(name, "runner ServiceAccount %s/%s (%s)", k[0], k[1], objectCount(uses[k]))
		case apierrors.IsNotFound(err):
			c.failure(name, "runner ServiceAccount %s/%s missing (%s cannot run): create it with the runner's RBAC (config/runner)", k[0], k[1], objectCount(uses[k]))
		default:
			c.failure(name, "%v", s.explain(err, "get", "serviceaccounts", "ServiceAccount", k[0], k[1]))
		}
	}
}

func objectCount(n int) string {
	if n == 1 {
		return "1 Terraform object"
	}
	return fmt.Sprintf("%d Terraform objects", n)
}

// checkAlertKind checks that the served versions of the Alert CRD take
// event sources of kind Terraform.
func (s *session) checkAlertKind(ctx context.Context, c *checker) {
	var crd apiextensionsv1.CustomResourceDefinition
	err := s.c.Get(ctx, client.ObjectKey{Name: alertCRD}, &crd)
	switch {
	case apierrors.IsNotFound(err):
		c.warning("alert-kind", "no Alert CRD (%s): Flux Alerts on Terraform objects need notification-controller", alertCRD)
		return
	case err != nil:
		c.warning("alert-kind", "%v", s.explain(err, "get", "customresourcedefinitions.apiextensions.k8s.io", "CustomResourceDefinition", "", alertCRD))
		return
	}
	var takes, refuses []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if alertTakesTerraform(v.Schema) {
			takes = append(takes, v.Name)
		} else {
			refuses = append(refuses, v.Name)
		}
	}
	if len(refuses) > 0 {
		c.warning("alert-kind/"+strings.Join(refuses, ","), "Alert %s: eventSources kind does not take Terraform: patch the CRD as docs/notifications.md says", strings.Join(refuses, ", "))
	}
	if len(takes) > 0 {
		c.success("alert-kind/"+strings.Join(takes, ","), "Alert %s: eventSources kind takes Terraform", strings.Join(takes, ", "))
	}
}

func alertTakesTerraform(v *apiextensionsv1.CustomResourceValidation) bool {
	if v == nil || v.OpenAPIV3Schema == nil {
		return false
	}
	spec, ok := v.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		return false
	}
	sources, ok := spec.Properties["eventSources"]
	if !ok || sources.Items == nil || sources.Items.Schema == nil {
		return false
	}
	kind, ok := sources.Items.Schema.Properties["kind"]
	if !ok {
		return false
	}
	if len(kind.Enum) == 0 {
		return true // any kind
	}
	for _, e := range kind.Enum {
		if string(e.Raw) == `"`+v1alpha1.TerraformKind+`"` {
			return true
		}
	}
	return false
}
