package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/runtime/acl"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/spf13/pflag"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/app"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/placement"
	"github.com/landform-dev/landform/internal/runs"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/version"
)

// flags are the controller's command line. The options Flux's controllers
// share are bound with fluxcd/pkg/runtime's own types, so that their names
// are those a Flux operator types (--log-level, --enable-leader-election,
// --kube-api-qps, --no-cross-namespace-refs, --interval-jitter-percentage,
// --watch-label-selector); Landform's earlier names stay for one release
// as deprecated aliases (aliases below).
type flags struct {
	log            logger.Options
	leaderElection leaderelection.Options
	client         runtimeclient.Options
	acl            acl.Options
	jitter         jitter.IntervalOptions
	// watch is bound by hand: Landform honours --watch-label-selector only
	// (not Flux's --watch-all-namespaces or --watch-configs-label-selector).
	watch helper.WatchOptions

	metricsAddr, healthAddr string
	eventsAddr              string
	concurrent              int
	concurrentRuns          int
	artifactMaxAge          time.Duration
	artifactMaxSize         int64
	downloadTimeout         time.Duration
	downloadMaxSize         int64
	extractedMaxSize        int64
	keptArtifactMaxSize     int64
	stateHistory            int
	engines                 [2]engineFlags
	runnerMode              string
	runnerBinary, engine    string
	workDir                 string
	providerMirrors         []string
	// Runner Pods.
	namespace          string
	runnerImage        string
	keepRunnerPods     bool
	runnerPodReuse     time.Duration
	runnerStartTimeout time.Duration
	// Runner lockdown.
	defaultServiceAccount        string
	enforceDefaultServiceAccount bool
	allowedRunnerImages          string

	// Deprecated aliases, applied over the flags they stand for.
	oldLeaderElect      bool
	oldAllowCrossNS     bool
	oldZapLogLevel      string
	oldZapEncoder       string
	oldZapIgnored       string
	oldZapIgnoredBool   bool
	oldZapIgnoredLevels string
	oldDrainTimeout     time.Duration
}

// engineFlags are one engine's release source (--<name>-releases-url,
// --<name>-signing-key-file).
type engineFlags struct {
	name, releasesURL, signingKeyFile string
}

// engineSources reads the signing keys named by the flags.
func (f *flags) engineSources() (inputs.EngineSources, error) {
	var out inputs.EngineSources
	for _, e := range f.engines {
		src := inputs.EngineSource{ReleasesURL: e.releasesURL}
		if e.signingKeyFile != "" {
			key, err := os.ReadFile(e.signingKeyFile)
			if err != nil {
				return out, fmt.Errorf("--%s-signing-key-file: %w", e.name, err)
			}
			src.SigningKey = string(key)
		}
		if e.name == "terraform" {
			out.Terraform = src
		} else {
			out.OpenTofu = src
		}
	}
	return out, nil
}

// alias is a deprecated flag and the flag that replaces it.
type alias struct{ old, replacement string }

// aliases are the flags renamed to Flux's names, kept for one release.
var aliases = []alias{
	{"leader-elect", "enable-leader-election"},
	{"allow-cross-namespace-refs", "no-cross-namespace-refs=false"},
	{"zap-log-level", "log-level"},
	{"zap-encoder", "log-encoding"},
	{"zap-devel", "log-level=debug"},
	{"zap-stacktrace-level", ""},
	{"zap-time-encoding", ""},
	// Runs no longer hold the controller up on SIGTERM: local runners
	// outlive it as runner Pods do.
	{"drain-timeout", ""},
}

func bindFlags(fs *pflag.FlagSet) *flags {
	f := &flags{}
	f.log.BindFlags(fs)
	f.leaderElection.BindFlags(fs)
	f.client.BindFlags(fs)
	f.acl.BindFlags(fs)
	// Deny by default: the namespace is the tenancy boundary (Flux allows
	// cross-namespace references unless told otherwise).
	f.acl.NoCrossNamespaceRefs = true
	fs.Lookup("no-cross-namespace-refs").DefValue = "true"
	fs.Lookup("no-cross-namespace-refs").Usage = "refuse sourceRef and dependsOn in other namespaces (reason CrossNamespaceRefDenied); --no-cross-namespace-refs=false lets them name other namespaces"
	f.jitter.BindFlags(fs)
	fs.StringVar(&f.watch.LabelSelector, "watch-label-selector", "", "reconcile only the Terraform objects whose labels match this Kubernetes label selector, as Flux's controllers shard: 'sharding.fluxcd.io/key in (shard1)' on a shard, '!sharding.fluxcd.io/key' on the main controller (empty: all objects); a non-empty selector also gives the shard its own leader election lease")

	fs.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of the Prometheus metrics endpoint")
	fs.StringVar(&f.healthAddr, "health-addr", ":8081", "address of the health and readiness probes")
	fs.StringVar(&f.eventsAddr, "events-addr", "", "notification-controller's event endpoint (http://notification-controller.flux-system.svc.cluster.local./ in a Flux installation): events go there as well as to Kubernetes, for Flux Alerts on Terraform objects (empty: Kubernetes events only)")
	fs.IntVar(&f.concurrent, "concurrent", 4, "Terraform objects reconciled in parallel (a reconcile only starts or inspects a run, so it is short)")
	fs.IntVar(&f.concurrentRuns, "concurrent-runs", runs.DefaultSlots, "runs (plan, apply, destroy) in flight at once; more wait, approvals, requested reconciles, new objects and deletions ahead of drift checks")
	fs.StringVar(&f.runnerMode, "runner", defaultRunnerMode(), "where runners run: pod (runner Pods; the default in a cluster) or local (child processes; the default elsewhere)")
	fs.StringVar(&f.runnerImage, "runner-image", "ghcr.io/landform-dev/landform-runner:"+version.Version, "runner image for --runner=pod, unless spec.runnerPodTemplate sets one")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "landform-system"), "the controller's namespace, which holds the runner CA Secret")
	fs.BoolVar(&f.keepRunnerPods, "keep-runner-pods", false, "keep runner Pods after their run, and those that failed to start, for debugging")
	fs.DurationVar(&f.runnerPodReuse, "runner-pod-reuse", placement.DefaultPodReuse, "keep a runner Pod whose run ended this long, its runner recycled (every process a module left killed, its directories emptied), for the next run of an object of its namespace whose runner Pod would be the same: ServiceAccount, image and template (0: one Pod per object's run)")
	fs.DurationVar(&f.runnerStartTimeout, "runner-start-timeout", placement.DefaultStartTimeout, "how long a runner Pod may take to run and answer")
	fs.StringVar(&f.defaultServiceAccount, "default-service-account", (&infrav1.Terraform{}).GetServiceAccountName(), "ServiceAccount of the runner Pods of objects that set no spec.serviceAccountName")
	fs.BoolVar(&f.enforceDefaultServiceAccount, "enforce-default-service-account", false, "refuse objects whose spec.serviceAccountName names another ServiceAccount than --default-service-account")
	fs.StringVar(&f.allowedRunnerImages, "allowed-runner-images", "", "comma-separated image prefixes that spec.runnerPodTemplate.spec.image must be under (empty: any image; --runner-image is always allowed); a prefix ends at '/', ':' or '@': ghcr.io/acme allows ghcr.io/acme/runner:v1, not ghcr.io/acmeevil/x")
	fs.DurationVar(&f.artifactMaxAge, "artifact-cache-max-age", 24*time.Hour, "remove cached artifacts no run used for this long (0: no age bound)")
	fs.Int64Var(&f.artifactMaxSize, "artifact-cache-max-size", 2<<30, "bytes the artifact cache may hold; the least recently used artifacts go first (0: no size bound; artifacts used within the last hour are always kept)")
	fs.DurationVar(&f.downloadTimeout, "artifact-download-timeout", source.DefaultDownloadTimeout, "bound on downloading one artifact, retries included")
	// Bounds on one artifact in the cache every tenant shares, generous so
	// that a source vendoring providers fits: see source.SizeLimits.
	fs.Int64Var(&f.downloadMaxSize, "artifact-download-max-size", source.DefaultMaxDownloadSize, "bytes of the largest artifact tarball downloaded; a larger one fails with reason ArtifactFailed (0 or negative: no bound)")
	fs.Int64Var(&f.extractedMaxSize, "artifact-extracted-max-size", source.DefaultMaxExtractedSize, "bytes the files of one artifact may add up to once extracted; a larger one fails with reason ArtifactFailed and nothing of it is extracted (0 or negative: no bound)")
	f.keptArtifactMaxSize = keptartifact.DefaultMaxSize
	fs.Var((*keptartifact.MaxSizeFlag)(&f.keptArtifactMaxSize), "kept-artifact-max-size", "bytes of the largest applied artifact kept (in Secrets owned by the Terraform object) to destroy with after its source is gone; a larger one is not kept (0 or negative: keep none)")
	fs.IntVar(&f.stateHistory, "state-history", statehistory.DefaultLimit, "versions of each object's state kept before its applies and destroys, for landform state history and landform state restore (0: none)")
	tf, tofu := &f.engines[0], &f.engines[1]
	tf.name, tofu.name = "terraform", "opentofu"
	fs.StringVar(&tf.releasesURL, "terraform-releases-url", "", "where spec.engine's terraform versions come from: the base URL of a mirror of https://releases.hashicorp.com's releases API (empty: that one)")
	fs.StringVar(&tf.signingKeyFile, "terraform-signing-key-file", "", "file of the ASCII-armored OpenPGP public key that terraform releases' checksums must be signed with, for a mirror that re-signs (empty: HashiCorp's release key)")
	fs.StringVar(&tofu.releasesURL, "opentofu-releases-url", "", "where spec.engine's opentofu versions come from: the base URL of a mirror of OpenTofu's release downloads, <url>/api.json and <url>/v<version>/<file> (empty: OpenTofu's own)")
	fs.StringVar(&tofu.signingKeyFile, "opentofu-signing-key-file", "", "file of the ASCII-armored OpenPGP public key that opentofu releases' checksums must be signed with, for a mirror that re-signs (empty: OpenTofu's release key)")
	fs.StringVar(&f.runnerBinary, "runner-binary", "landform-runner", "runner binary for --runner=local")
	fs.StringVar(&f.engine, "engine", "", "terraform or tofu binary for local runners (default: tofu, else terraform, on PATH)")
	fs.StringVar(&f.workDir, "work-dir", filepath.Join(os.TempDir(), "landform"), "directory for the artifact cache and local runners")
	fs.StringArrayVar(&f.providerMirrors, "provider-mirror", nil, "read-only provider filesystem mirror for runners (repeatable; with --runner=pod, a path inside the runner image)")

	fs.BoolVar(&f.oldLeaderElect, "leader-elect", false, "")
	fs.BoolVar(&f.oldAllowCrossNS, "allow-cross-namespace-refs", false, "")
	fs.StringVar(&f.oldZapLogLevel, "zap-log-level", "", "")
	fs.StringVar(&f.oldZapEncoder, "zap-encoder", "", "")
	fs.BoolVar(&f.oldZapIgnoredBool, "zap-devel", false, "")
	fs.StringVar(&f.oldZapIgnoredLevels, "zap-stacktrace-level", "", "")
	fs.StringVar(&f.oldZapIgnored, "zap-time-encoding", "", "")
	fs.DurationVar(&f.oldDrainTimeout, "drain-timeout", 0, "")
	for _, a := range aliases {
		msg := "use --" + a.replacement
		if a.replacement == "" {
			msg = "no longer has an effect"
		}
		_ = fs.MarkDeprecated(a.old, msg)
	}
	return f
}

// applyAliases sets, from the deprecated flags given, the flags they stand
// for, unless those were given too.
func (f *flags) applyAliases(fs *pflag.FlagSet) {
	given := func(name string) bool { return fs.Changed(name) }
	if given("leader-elect") && !given("enable-leader-election") {
		f.leaderElection.Enable = f.oldLeaderElect
	}
	if given("allow-cross-namespace-refs") && !given("no-cross-namespace-refs") {
		f.acl.NoCrossNamespaceRefs = !f.oldAllowCrossNS
	}
	if given("zap-log-level") && !given("log-level") {
		f.log.LogLevel = f.oldZapLogLevel
	}
	if given("zap-devel") && f.oldZapIgnoredBool && !given("log-level") && !given("zap-log-level") {
		f.log.LogLevel = "debug"
	}
	if given("zap-encoder") && !given("log-encoding") {
		f.log.LogEncoding = f.oldZapEncoder
	}
}

// deprecated says which deprecated flags were given, for the log (pflag
// also prints this on standard error).
func (f *flags) deprecated(fs *pflag.FlagSet) []string {
	var out []string
	for _, a := range aliases {
		if fs.Changed(a.old) {
			if a.replacement == "" {
				out = append(out, fmt.Sprintf("flag --%s is deprecated and has no effect", a.old))
				continue
			}
			out = append(out, fmt.Sprintf("flag --%s is deprecated: use --%s", a.old, a.replacement))
		}
	}
	return out
}

// validate refuses what Flux's logger would silently read as info.
func (f *flags) validate() error {
	switch f.log.LogLevel {
	case "trace", "debug", "info", "error":
	default:
		return fmt.Errorf("--log-level=%s: use trace, debug, info or error", f.log.LogLevel)
	}
	switch f.log.LogEncoding {
	case "json", "console":
	default:
		return fmt.Errorf("--log-encoding=%s: use json or console", f.log.LogEncoding)
	}
	return nil
}

// defaultRunnerMode runs runners in Pods when the controller itself runs in
// a cluster, and as child processes elsewhere.
func defaultRunnerMode() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return app.RunnerPod
	}
	return app.RunnerLocal
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
