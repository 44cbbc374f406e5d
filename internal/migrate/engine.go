package migrate

import (
	"fmt"
	"regexp"
	"strings"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Engine names of spec.engine.name (the CRD's enum).
const (
	engineTerraform = "terraform"
	engineOpenTofu  = "opentofu"
)

// runnerReleases is the engine each of tofu-controller's own runner images
// (ghcr.io/{weaveworks,flux-iac}/tf-runner:<release>) holds: the default
// TF_VERSION or TOFU_VERSION of runner.Dockerfile at that release's tag of
// flux-iac/tofu-controller, which release.yaml builds on the tag's push
// without overriding it. Read from every tag, v0.9.0-rc.1 (the first
// runner image) to v0.16.5; a newer release is not known, and not guessed.
var runnerReleases = releaseTable(map[string]string{
	"terraform 1.1.7": "v0.9.0 v0.9.0-rc.6 v0.9.0-rc.7 v0.9.0-rc.8 v0.9.1 v0.9.2 v0.9.3",
	"terraform 1.1.5": "v0.9.0-rc.1 v0.9.0-rc.2",
	"terraform 1.1.6": "v0.9.0-rc.3 v0.9.0-rc.4 v0.9.0-rc.5",
	"terraform 1.1.8": "v0.9.4",
	"terraform 1.1.9": "v0.9.5 v0.9.5-rc.1 v0.9.5-rc.2 v0.10.0 v0.10.0-rc.1 v0.10.0-rc.2 v0.10.0-rc.3 v0.10.0-rc.4 v0.10.0-rc.5 v0.10.0-rc.6 v0.10.0-rc.7 v0.10.0-rc.8 v0.10.1 v0.11.0 v0.11.0-rc.1 v0.11.0-rc.2 v0.11.0-rc.3 v0.12.0 v0.12.0-rc.1 v0.12.0-rc.2 v0.12.0-rc.3 v0.12.0-rc.4 v0.12.0-rc.5 v0.12.0-rc.6 v0.13.0-rc.1",
	"terraform 1.2.0": "v0.9.5-rc.3",
	"terraform 1.3.1": "v0.13.0 v0.13.0-rc.2 v0.13.0-rc.3 v0.13.0-rc.4 v0.13.0-rc.5 v0.13.0-rc.6 v0.13.0-rc.7 v0.13.0-rc.8 v0.13.0-rc.9 v0.13.0-rc.10 v0.13.0-rc.11 v0.13.1",
	"terraform 1.3.9": "v0.14.0 v0.14.0-rc.6 v0.14.1 v0.14.2 v0.14.3 v0.14.4 v0.14.5 v0.15.0 v0.15.0-rc.1 v0.15.0-rc.2 v0.15.0-rc.3 v0.15.0-rc.4 v0.15.0-rc.5 v0.15.0-rc.6 v0.15.1 v0.16.0-rc.1 v0.16.0-rc.2 v0.16.0-rc.3",
	"terraform 1.3.7": "v0.14.0-rc.1 v0.14.0-rc.2 v0.14.0-rc.3 v0.14.0-rc.4 v0.14.0-rc.5",
	"opentofu 1.11.3": "v0.16.0 v0.16.0-rc.8",
	"terraform 1.5.7": "v0.16.0-rc.4 v0.16.0-rc.5 v0.16.0-rc.6 v0.16.0-rc.7",
	"opentofu 1.11.4": "v0.16.1",
	"opentofu 1.11.5": "v0.16.2",
	"opentofu 1.11.6": "v0.16.3",
	"opentofu 1.12.1": "v0.16.4 v0.16.5",
})

// azureRunnerReleases is the same for tf-runner-azure
// (runner-azure.Dockerfile), published from v0.13.1.
var azureRunnerReleases = releaseTable(map[string]string{
	"terraform 1.3.1": "v0.13.1",
	"terraform 1.3.9": "v0.14.0 v0.14.0-rc.6 v0.14.1 v0.14.2 v0.14.3 v0.14.4 v0.14.5 v0.15.0 v0.15.0-rc.1 v0.15.0-rc.2 v0.15.0-rc.3 v0.15.0-rc.4 v0.15.0-rc.5 v0.15.0-rc.6 v0.15.1 v0.16.0-rc.1 v0.16.0-rc.2 v0.16.0-rc.3 v0.16.0-rc.4 v0.16.0-rc.5 v0.16.0-rc.6 v0.16.0-rc.7",
	"terraform 1.3.7": "v0.14.0-rc.1 v0.14.0-rc.2 v0.14.0-rc.3 v0.14.0-rc.4 v0.14.0-rc.5",
	"opentofu 1.11.3": "v0.16.0 v0.16.0-rc.8",
	"opentofu 1.11.4": "v0.16.1",
	"opentofu 1.11.5": "v0.16.2",
	"opentofu 1.11.6": "v0.16.3",
	"opentofu 1.12.1": "v0.16.4 v0.16.5",
})

// releaseTable turns "engine version" → "release release ..." into
// release → engine.
func releaseTable(byEngine map[string]string) map[string]v1alpha1.EngineSpec {
	out := map[string]v1alpha1.EngineSpec{}
	for engine, releases := range byEngine {
		name, version, _ := strings.Cut(engine, " ")
		for _, r := range strings.Fields(releases) {
			out[r] = v1alpha1.EngineSpec{Name: name, Version: version}
		}
	}
	return out
}

var (
	// officialRunner is tofu-controller's runner repository, before and
	// after it moved from weaveworks to flux-iac (v0.16.0-rc.4).
	officialRunner = regexp.MustCompile(`^ghcr\.io/(weaveworks|flux-iac)/(tf-runner|tf-runner-azure)$`)
	// mplTag is an image its release-runners workflow built with one
	// Terraform version: <release>-tf-<version>.
	mplTag = regexp.MustCompile(`^(v[0-9]+\.[0-9]+\.[0-9]+(?:-rc\.[0-9]+)?)-tf-([0-9]+\.[0-9]+\.[0-9]+)$`)
	// communityRunner holds the images of flux-iac/tf-runner-images:
	// tofu-controller's engine-less base image plus the Terraform version
	// the tag names (and the AWS CLI for "aws").
	communityRunner = "ghcr.io/tf-controller/tf-runner"
	communityTag    = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(?:-rc\.[0-9]+)?-(base|aws)-tf-([0-9]+\.[0-9]+\.[0-9]+(?:-[a-z0-9]+)?)-(mpl|bsl)$`)
)

// runnerImage is what landform migrate knows of a runner image.
type runnerImage struct {
	// engine is the engine the image holds, nil when not known for certain.
	engine *v1alpha1.EngineSpec
	// official: tofu-controller's or its community's image, holding the
	// engine and tools, nothing of the user's.
	official bool
	// tools are what the image holds besides the engine and git.
	tools string
	// unknown says why engine is nil.
	unknown string
}

// inspectRunnerImage says which engine a tofu-controller runner image
// holds, when its name says so for certain.
func inspectRunnerImage(image string) runnerImage {
	ref, digest, _ := strings.Cut(image, "@") // a digest pins what the tag named
	repo, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	if repo == communityRunner {
		m := communityTag.FindStringSubmatch(tag)
		if m == nil {
			return runnerImage{official: true, unknown: fmt.Sprintf("its tag %q is not one flux-iac/tf-runner-images builds (<release>-<base|aws>-tf-<version>-<mpl|bsl>)", tag)}
		}
		img := runnerImage{official: true, engine: &v1alpha1.EngineSpec{Name: engineTerraform, Version: m[2]}}
		if m[1] == "aws" {
			img.tools = "the AWS CLI"
		}
		return img
	}
	m := officialRunner.FindStringSubmatch(repo)
	if m == nil {
		return runnerImage{unknown: "a custom image, whose name does not say which engine it holds"}
	}
	img := runnerImage{official: true}
	table := runnerReleases
	if m[2] == "tf-runner-azure" {
		table, img.tools = azureRunnerReleases, "the Azure CLI"
	}
	if e, ok := table[tag]; ok {
		img.engine = &e
		return img
	}
	switch mpl := mplTag.FindStringSubmatch(tag); {
	case tag == "":
		img.unknown = "no tag names its release"
	case tag == "latest":
		img.unknown = "tag latest followed tofu-controller's releases, from Terraform to OpenTofu at v0.16.0-rc.8"
	case strings.HasSuffix(tag, "-base"):
		img.unknown = "a base image holds no engine"
	case mpl != nil && m[2] == "tf-runner" && runnerReleases[mpl[1]].Name == engineTerraform:
		img.engine = &v1alpha1.EngineSpec{Name: engineTerraform, Version: mpl[2]}
	case mpl != nil && runnerReleases[mpl[1]].Name == engineOpenTofu:
		img.unknown = fmt.Sprintf("from v0.16.0-rc.8 on, tofu-controller builds OpenTofu into its runner images, whatever Terraform version a tag such as %s names", tag)
	default:
		img.unknown = fmt.Sprintf("tag %q is not a tofu-controller release landform migrate knows, v0.9.0-rc.1 to v0.16.5", tag)
	}
	return img
}

// runnerImageField maps runnerPodTemplate.spec.image: the engine the image
// holds becomes spec.engine; Landform runs its own runner either way.
func (c *converter) runnerImageField(field, image string) {
	c.imageSet = true
	img := inspectRunnerImage(image)
	if img.engine != nil {
		c.out.Spec.Engine = img.engine
		c.note("runnerPodTemplate.spec.image %s is tofu-controller's runner with %s %s: spec.engine names that engine and version, which Landform's runner installs", image, img.engine.Name, img.engine.Version)
		if img.tools != "" {
			c.unmapped(field, fmt.Sprintf("%s also holds %s, which Landform's runner image does not: if the module needs it, build a Landform runner image with it (the Dockerfile's runner target) and set runnerPodTemplate.spec.image to it", image, img.tools))
		}
		return
	}
	what := fmt.Sprintf("%s runs tofu-controller's runner, not Landform's: build a Landform runner image with the same tools (the Dockerfile's runner target) and set runnerPodTemplate.spec.image to it", image)
	if img.official {
		what = fmt.Sprintf("%s is tofu-controller's runner; Landform runs its own", image)
		if img.tools != "" {
			what += fmt.Sprintf("; if the module needs %s, build a Landform runner image with it (the Dockerfile's runner target) and set runnerPodTemplate.spec.image to it", img.tools)
		}
	}
	c.unmapped(field, fmt.Sprintf("%s. Its engine cannot be told: %s; set spec.engine to the engine and version that last wrote the state (its terraform_version)", what, img.unknown))
}

// engineEnv is a runner env entry that looks as if it chose the engine's
// version.
type engineEnv struct {
	name, engine, version string
}

// finishEngine says what decides the engine when the image did not.
func (c *converter) finishEngine() {
	if c.out.Spec.Engine != nil {
		return
	}
	for _, e := range c.engineEnv {
		c.note("runner env %s=%s chose no engine in tofu-controller (its runner ran the binary its image held) and chooses none in Landform: if that is the version the image held, set spec.engine: {name: %s, version: %q}", e.name, e.version, e.engine, e.version)
	}
	if !c.imageSet {
		c.note("spec.engine is not set, nor was a runner image: tofu-controller ran its controller's runner image (RUNNER_POD_IMAGE; its own images held Terraform up to release v0.16.0-rc.7, 1.5.7 from rc.4, and OpenTofu from v0.16.0-rc.8); " +
			"Landform runs its controller's default engine: to keep the engine and version that last wrote the state (its terraform_version), set spec.engine")
	}
}
