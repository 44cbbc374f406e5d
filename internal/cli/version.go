package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/version"
)

// Labels of the controller Deployment, as the Helm chart and the kustomize
// bases (config/manager) set them.
const (
	nameLabel       = "app.kubernetes.io/name"
	componentLabel  = "app.kubernetes.io/component"
	nameValue       = "landform"
	controllerValue = "controller"
)

// ControllerSelector selects the controller Deployments (hack/packaging
// checks that the chart and config/manager label theirs so).
const ControllerSelector = nameLabel + "=" + nameValue + "," + componentLabel + "=" + controllerValue

// versions is what `version` reports.
type versions struct {
	Client      string              `json:"client"`
	Controllers []controllerVersion `json:"controllers,omitempty"`
	// Controller says why no controller version is known.
	Controller string `json:"controller,omitempty"`
	Engine     string `json:"engine,omitempty"`
	// EngineFrom names the object whose stored plan gave Engine, or why
	// Engine is unknown.
	EngineFrom string `json:"engineFrom,omitempty"`
}

type controllerVersion struct {
	// Version is the tag of the image the controller runs.
	Version    string `json:"version"`
	Deployment string `json:"deployment"`
	// Image is the manager container's image: the running Pods' when
	// they can be read, else the Deployment's.
	Image string `json:"image,omitempty"`
}

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version [NAME]",
		Short: "Print the client, controller and engine versions",
		Long: "Print the versions of this CLI, of the controller (the tag of the image its Pods\n" +
			"run, for each Deployment labelled " + ControllerSelector + ",\n" +
			"in any namespace) and of the engine (terraform or tofu) that made NAME's stored\n" +
			"plan, or the namespace's most recent plan.",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return a.runVersion(cmd.Context(), name, clientOnly, output)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client version (no cluster needed)")
	a.outputFlag(cmd, &output, "print as json or yaml")
	return cmd
}

func (a *app) runVersion(ctx context.Context, name string, clientOnly bool, format string) error {
	v := versions{Client: version.Version}
	print := func() error {
		if format != "" {
			return printData(a.Streams.Out, format, v)
		}
		w := a.Streams.Out
		fmt.Fprintf(w, "Client:      landform %s\n", v.Client)
		if clientOnly {
			return nil
		}
		if len(v.Controllers) == 0 {
			fmt.Fprintf(w, "Controller:  %s\n", v.Controller)
		}
		for _, c := range v.Controllers {
			fmt.Fprintf(w, "Controller:  %s (Deployment %s)\n", c.Version, c.Deployment)
		}
		engine := v.Engine
		if engine == "" {
			engine = "unknown"
		}
		fmt.Fprintf(w, "Engine:      %s (%s)\n", engine, v.EngineFrom)
		return nil
	}
	if clientOnly {
		return print()
	}
	s, err := a.connect()
	if err != nil {
		_ = print()
		return err
	}
	if err := s.checkInstalled(); err != nil {
		v.Controller, v.EngineFrom = "unknown (the cluster could not be asked)", "the cluster could not be asked"
		if errors.Is(err, errNotInstalled) {
			v.Controller, v.EngineFrom = "not installed", "no Landform API in this cluster"
		}
		_ = print()
		return err
	}
	v.Controllers, v.Controller = s.controllerVersions(ctx)
	v.Engine, v.EngineFrom, err = s.engineVersion(ctx, name)
	if err != nil {
		if name != "" {
			return err
		}
		v.EngineFrom = err.Error()
	}
	return print()
}

// checkInstalled asks discovery whether the Terraform API is served.
func (s *session) checkInstalled() error {
	dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
	if err != nil {
		return err
	}
	resources, err := dc.ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return errNotInstalled
	}
	if err != nil {
		return s.explain(err, "discover", v1alpha1.GroupVersion.String(), "API", "", "")
	}
	for _, r := range resources.APIResources {
		if r.Name == "terraforms" {
			return nil
		}
	}
	return errNotInstalled
}

// controllerVersions finds the controller Deployments and the version
// each runs: the tag of its running Pods' manager image (the chart's
// version label names the chart's appVersion, which an image override
// leaves behind), else of its Pod template's. When there is no
// Deployment, the second result says why.
func (s *session) controllerVersions(ctx context.Context) ([]controllerVersion, string) {
	var list appsv1.DeploymentList
	err := s.c.List(ctx, &list, client.MatchingLabels{nameLabel: nameValue, componentLabel: controllerValue})
	if err != nil {
		return nil, "unknown (" + s.explain(err, "list", resDeployments, "Deployment", "", "").Error() + ")"
	}
	if len(list.Items) == 0 {
		return nil, "no Deployment labelled " + ControllerSelector + " (it may run outside the cluster)"
	}
	var out []controllerVersion
	for _, d := range list.Items {
		images := s.runningImages(ctx, &d)
		if len(images) == 0 {
			images = []string{managerImage(d.Spec.Template.Spec.Containers)}
		}
		var tags []string
		for _, image := range images {
			tags = append(tags, imageTag(image))
		}
		v := controllerVersion{Version: strings.Join(tags, ", "), Deployment: d.Namespace + "/" + d.Name, Image: strings.Join(images, ", ")}
		if len(tags) > 1 {
			v.Version += " (rolling out)"
		}
		out = append(out, v)
	}
	return out, ""
}

// runningImages are the distinct images the manager containers of d's
// running Pods run, in Pod name order; none when the Pods cannot be read.
func (s *session) runningImages(ctx context.Context, d *appsv1.Deployment) []string {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil
	}
	slices.SortFunc(pods.Items, func(x, y corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	var images []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		var running []corev1.Container
		for _, c := range p.Status.ContainerStatuses {
			running = append(running, corev1.Container{Name: c.Name, Image: c.Image})
		}
		if image := managerImage(running); image != "" && !slices.Contains(images, image) {
			images = append(images, image)
		}
	}
	return images
}

// managerImage is the image of the manager container (or the first
// container's); "" without containers.
func managerImage(containers []corev1.Container) string {
	if len(containers) == 0 {
		return ""
	}
	image := containers[0].Image
	for _, c := range containers {
		if c.Name == "manager" {
			image = c.Image
		}
	}
	return image
}

// imageTag is the tag of an image reference, "unknown" without one.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "unknown"
}

// engineVersion reads terraform_version from name's stored plan, or from
// the most recently planned object's in the namespace.
func (s *session) engineVersion(ctx context.Context, name string) (string, string, error) {
	var obj *v1alpha1.Terraform
	if name != "" {
		o, err := s.terraform(ctx, name)
		if err != nil {
			return "", "", err
		}
		obj = o
	} else {
		var list v1alpha1.TerraformList
		if err := s.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
			return "", "", s.explain(err, "list", resTerraforms, "Terraform", s.ns, "")
		}
		for i := range list.Items {
			o := &list.Items[i]
			if o.Status.Plan == nil || o.Status.Plan.PlannedAt == nil {
				continue
			}
			if obj == nil || o.Status.Plan.PlannedAt.After(obj.Status.Plan.PlannedAt.Time) {
				obj = o
			}
		}
		if obj == nil {
			return "", "no plan in namespace " + s.ns + " yet", nil
		}
	}
	d := s.planDetailsFor(ctx, obj, "")
	if d == nil || d.Engine == "" {
		return "", "no readable stored plan of " + obj.Namespace + "/" + obj.Name, nil
	}
	return d.Engine, "made the plan of " + obj.Namespace + "/" + obj.Name, nil
}
