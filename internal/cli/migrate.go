package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/migrate"
	"github.com/landform-dev/landform/internal/statelock"
)

// resTofuTerraforms is tofu-controller's resource, as `kubectl auth can-i`
// takes it.
const resTofuTerraforms = "terraforms." + migrate.Group

type migrateOptions struct {
	files          []string
	allNamespaces  bool
	deletionPolicy string
	outputDir      string
	keepAuto       bool
}

func (a *app) migrateCommand() *cobra.Command {
	var o migrateOptions
	cmd := &cobra.Command{
		Use:   "migrate [NAME...] [-f FILE]...",
		Short: "Write Landform manifests for tofu-controller Terraform objects, keeping their state",
		Long: "Reads tofu-controller Terraform objects (" + migrate.APIVersion + ") from files (-f)\n" +
			"or from the cluster, and prints the Landform Terraform objects that replace them:\n" +
			"every field with an equivalent is mapped, the state Secret tfstate-<workspace>-<suffix>\n" +
			"is kept, and the report on stderr lists what could not be mapped and why.\n\n" +
			"tofu-controller keeps resources when its object is deleted; Landform destroys them.\n" +
			"So migrated objects get deletionPolicy: Orphan unless the source had\n" +
			"destroyResourcesOnDeletion: true or --deletion-policy says otherwise.\n\n" +
			"approvePlan: auto becomes manual approval, so that the first plan, which shows\n" +
			"whatever the migration changed, is read before it is applied; --keep-auto keeps it.\n\n" +
			"Nothing is changed in the cluster. Secrets are never read, only looked for.\n" +
			"The steps around it: docs/migrating-from-tofu-controller.md.",
		Example: a.examples("migrate", "-f infra/terraform.yaml > infra/landform.yaml", "-n team-a --output-dir migrated/") +
			"\n  kubectl get terraforms." + migrate.Group + " -A -o yaml | " + a.cmdName("migrate") + " -f -",
		ValidArgsFunction: a.completeTofuNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runMigrate(cmd.Context(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "a file of tofu-controller manifests (YAML or JSON, several documents, Lists); - reads stdin; repeatable. Without it, the objects are read from the cluster")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "read the tofu-controller objects of every namespace")
	f.StringVar(&o.deletionPolicy, "deletion-policy", "", "deletionPolicy of every migrated object, Delete or Orphan (default: Orphan, or Delete where the source had destroyResourcesOnDeletion: true)")
	f.StringVar(&o.outputDir, "output-dir", "", "write each object to DIR/[NAMESPACE-]NAME.yaml instead of stdout")
	f.BoolVar(&o.keepAuto, "keep-auto", false, "keep approvePlan: auto (default: the migrated object waits for the approval of its first plan)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("output-dir")
	_ = cmd.RegisterFlagCompletionFunc("deletion-policy", cobra.FixedCompletions([]string{"Delete", "Orphan"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runMigrate(ctx context.Context, names []string, o migrateOptions) error {
	policy := v1alpha1.DeletionPolicy(o.deletionPolicy)
	switch policy {
	case "", v1alpha1.DeletionPolicyDelete, v1alpha1.DeletionPolicyOrphan:
	default:
		return fmt.Errorf("--deletion-policy %q: use Delete or Orphan", o.deletionPolicy)
	}
	if len(o.files) > 0 && (len(names) > 0 || o.allNamespaces) {
		return errors.New("NAME and -A select objects in the cluster: drop them, or -f")
	}

	var (
		srcs    []migrate.Source
		skipped []string
		s       *session
		err     error
	)
	if len(o.files) > 0 {
		srcs, skipped, err = a.readManifests(o.files)
	} else {
		s, err = a.connect()
		if err != nil {
			return err
		}
		srcs, err = s.tofuTerraforms(ctx, names, o.allNamespaces)
	}
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		for _, sk := range skipped {
			fmt.Fprintf(a.Streams.ErrOut, "skipped: %s\n", sk)
		}
		return errors.New("no tofu-controller Terraform objects (" + migrate.APIVersion + ") found")
	}

	results := make([]migrate.Result, 0, len(srcs))
	for _, src := range srcs {
		r := migrate.Convert(src, migrate.Options{DeletionPolicy: policy, KeepAuto: o.keepAuto})
		if s != nil && r.Object != nil && r.StateSecret != "" {
			s.checkState(ctx, &r)
		}
		results = append(results, r)
	}
	if err := a.writeManifests(results, o.outputDir); err != nil {
		return err
	}
	for _, r := range results {
		r.WriteReport(a.Streams.ErrOut)
	}
	migrate.WriteSummary(a.Streams.ErrOut, results, skipped)

	refused := 0
	for _, r := range results {
		if r.Object == nil {
			refused++
		}
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d objects not migrated: the report says why", refused, len(results))
	}
	return nil
}

// readManifests reads every file ("-" is stdin).
func (a *app) readManifests(files []string) ([]migrate.Source, []string, error) {
	var srcs []migrate.Source
	var skipped []string
	for _, name := range files {
		var r io.Reader
		origin := name
		if name == "-" {
			r, origin = a.Streams.In, "stdin"
		} else {
			f, err := os.Open(name)
			if err != nil {
				return nil, nil, fmt.Errorf("reading %s: %w", name, err)
			}
			defer f.Close()
			r = f
		}
		got, sk, err := migrate.Decode(r, origin)
		if err != nil {
			return nil, nil, err
		}
		srcs = append(srcs, got...)
		skipped = append(skipped, sk...)
	}
	return srcs, skipped, nil
}

// writeManifests prints the migrated objects as one YAML stream, or writes
// one file each.
func (a *app) writeManifests(results []migrate.Result, dir string) error {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	var stream bytes.Buffer
	written := map[string]bool{}
	for _, r := range results {
		if r.Object == nil {
			continue
		}
		m, err := migrate.Manifest(r.Object)
		if err != nil {
			return err
		}
		if dir == "" {
			stream.WriteString("---\n")
			stream.Write(m)
			continue
		}
		name := r.Object.Name + ".yaml"
		if r.Object.Namespace != "" {
			name = r.Object.Namespace + "-" + name
		}
		if written[name] {
			return fmt.Errorf("two objects would be written to %s: migrate them separately", filepath.Join(dir, name))
		}
		written[name] = true
		if err := os.WriteFile(filepath.Join(dir, name), m, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
		}
		fmt.Fprintf(a.Streams.ErrOut, "wrote %s\n", filepath.Join(dir, name))
	}
	_, err := a.Streams.Out.Write(stream.Bytes())
	return err
}

var tofuListGVK = schema.GroupVersionKind{Group: migrate.Group, Version: migrate.Version, Kind: migrate.Kind + "List"}

// tofuTerraforms reads tofu-controller's objects: those named, or all of
// the namespace (every namespace with allNamespaces).
func (s *session) tofuTerraforms(ctx context.Context, names []string, allNamespaces bool) ([]migrate.Source, error) {
	ns := s.ns
	if allNamespaces {
		ns = ""
	}
	var items []unstructured.Unstructured
	if len(names) > 0 {
		for _, name := range names {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: migrate.Group, Version: migrate.Version, Kind: migrate.Kind})
			if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
				return nil, s.explainTofu(err, "get", ns, name)
			}
			items = append(items, *u)
		}
	} else {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(tofuListGVK)
		if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, s.explainTofu(err, "list", ns, "")
		}
		items = list.Items
		slices.SortFunc(items, func(x, y unstructured.Unstructured) int {
			return strings.Compare(x.GetNamespace()+"/"+x.GetName(), y.GetNamespace()+"/"+y.GetName())
		})
	}
	srcs := make([]migrate.Source, 0, len(items))
	for _, u := range items {
		src, err := migrate.FromObject(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

func (s *session) explainTofu(err error, verb, ns, name string) error {
	if apimeta.IsNoMatchError(err) {
		return errors.New("tofu-controller's CRD (" + resTofuTerraforms + ", " + migrate.Version + ") is not in this cluster: pass its manifests with -f, or check --context")
	}
	return s.explain(err, verb, resTofuTerraforms, "tofu-controller Terraform", ns, name)
}

// checkState looks for the state Secret (its metadata only: its data is
// never read) and the state Lease's holder.
func (s *session) checkState(ctx context.Context, r *migrate.Result) {
	ns := r.Object.Namespace
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
	switch err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.StateSecret}, meta); {
	case err == nil:
		found := true
		r.StateFound = &found
	case apierrors.IsNotFound(err):
		found := false
		r.StateFound = &found
	default:
		r.Notes = append(r.Notes, fmt.Sprintf("could not look for the state Secret %s: %v", r.StateSecret, s.explain(err, "get", resSecrets, "Secret", ns, r.StateSecret)))
	}
	var lease coordinationv1.Lease
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: statelock.LeaseName(r.StateSecret)}, &lease); err == nil &&
		lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		holder := "lock " + *lease.Spec.HolderIdentity
		var info statelock.LockInfo
		if err := json.Unmarshal([]byte(lease.Annotations[statelock.InfoAnnotation]), &info); err == nil && info.Who != "" {
			holder = fmt.Sprintf("%s (lock %s, %s)", info.Who, *lease.Spec.HolderIdentity, info.Operation)
		}
		r.StateLockHolder = holder
	}
}

// completeTofuNames completes NAME with tofu-controller's objects of the
// namespace.
func (a *app) completeTofuNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	s, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tofuListGVK)
	if err := s.c.List(cmd.Context(), list, client.InNamespace(s.ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, u := range list.Items {
		if strings.HasPrefix(u.GetName(), toComplete) && !slices.Contains(args, u.GetName()) {
			names = append(names, u.GetName())
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
