package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/inputs"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/reachability"
	"github.com/landform-dev/landform/internal/source"
	"github.com/landform-dev/landform/internal/stateguard"
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles bounds reconciles (--concurrent). A
	// reconcile only starts or inspects a run, so it is short.
	MaxConcurrentReconciles int
	// SourceDiscoveryInterval is how often the API server is asked which
	// Flux source kinds it serves (DefaultSourceDiscoveryInterval).
	SourceDiscoveryInterval time.Duration
}

// RBAC for runner Pods (--runner=pod): the controller creates and deletes
// one Pod per run (with --runner-pod-reuse, patches a reused Pod's labels
// and owner for the object it serves next), checks the runner ServiceAccount exists, and writes the
// runner CA Secret and the namespaces' runner certificate Secrets.

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update

// RBAC for the state identity (internal/custody) and the namespaces of
// runs (internal/stateguard: being deleted, admitting only previews; read
// from a cache of their metadata, hence list and watch).
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// RBAC for inputs read from object fields (internal/inputs): Services and
// Ingresses by default (a load balancer's address); the chart's inputKinds
// value grants more kinds.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch

// SetupWithManager registers indexes and watches (r.Runs and r.Custody
// are given; the process adds r.Runs to mgr): the object itself (spec,
// approval and reconcile-request annotations), its sources' new artifacts
// (of the source kinds the API server serves: terraform_sourcekinds.go),
// and the Terraform objects it depends on.
func (r *TerraformReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &infrav1.Terraform{}, sourceIndexKey, indexSource); err != nil {
		return fmt.Errorf("indexing sourceRef: %w", err)
	}
	if err := idx.IndexField(ctx, &infrav1.Terraform{}, dependsOnIndexKey, indexDependsOn); err != nil {
		return fmt.Errorf("indexing dependsOn: %w", err)
	}
	if err := idx.IndexField(ctx, &infrav1.Terraform{}, varsFromIndexKey, func(o client.Object) []string {
		return inputs.IndexKeys(o.(*infrav1.Terraform))
	}); err != nil {
		return fmt.Errorf("indexing varsFrom: %w", err)
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Engines.Resolver == nil {
		r.Engines.Resolver = &engines.Resolver{}
	}
	r.inputs = &inputs.Resolver{Reader: r.APIReader, Mapper: mgr.GetRESTMapper(),
		AllowCrossNamespaceRefs: r.AllowCrossNamespaceRefs, Engines: r.Engines}
	if r.Runs == nil || r.Custody == nil {
		return errors.New("the reconciler needs its run tracker (Runs) and state keeper (Custody)")
	}
	r.report = &reporter{recorder: r.EventRecorder, notifier: r.Notifier, metrics: helper.NewMetrics(mgr, metrics.Flux(), infrav1.Finalizer)}
	r.state = &stateguard.Guard{Keeper: r.Custody, Events: r.report, Runs: r.Runs}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	r.sourceKinds = &source.Served{}
	by := indexed{r.Client}
	kinds := &sourceKindWatcher{
		served:    r.sourceKinds,
		discovery: dc,
		cache:     mgr.GetCache(),
		reader:    mgr.GetClient(),
		interval:  opts.SourceDiscoveryInterval,
		log:       mgr.GetLogger().WithName("source-kinds"),
		mapFor:    by.source,
		watched:   map[schema.GroupVersionKind]bool{},
		wake:      make(chan event.GenericEvent, 64),
	}
	if kinds.interval <= 0 {
		kinds.interval = DefaultSourceDiscoveryInterval
	}
	back := make(chan event.GenericEvent, 64)
	probe := &reachability.Probe{
		Ready: func(ctx context.Context) error { return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() },
		Back:  reachability.WakeAll(r.Client, back),
		Log:   mgr.GetLogger().WithName("reachability"),
	}
	if err := mgr.Add(probe); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.Terraform{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			predicates.ReconcileRequestedPredicate{},
		))).
		Watches(&infrav1.Terraform{}, handler.EnqueueRequestsFromMapFunc(by.dependents)).
		// A varsFrom Secret or ConfigMap created or changed: its users plan
		// with it (a Stalled VarsNotFound recovers). Metadata only: the
		// controller caches no Secret's data.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(by.data("Secret")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(by.data("ConfigMap")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// A run's progress and end bring its object back.
		WatchesRawSource(ctrlsource.Channel(r.Runs.Events(), &handler.EnqueueRequestForObject{})).
		// A source kind that became served wakes the objects using it.
		WatchesRawSource(ctrlsource.Channel(kinds.wake, &handler.EnqueueRequestForObject{})).
		// The API server back after an outage wakes every object.
		WatchesRawSource(ctrlsource.Channel(back, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Build(r)
	if err != nil {
		return err
	}
	kinds.ctrl = c
	r.inputs.Watches = inputs.NewWatches(c, mgr.GetCache(), r.APIReader, by.input)
	if err := kinds.discover(ctx, false); err != nil {
		return fmt.Errorf("discovering the Flux source kinds served: %w", err)
	}
	return mgr.Add(kinds)
}
