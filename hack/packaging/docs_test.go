package packaging

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/acl"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config" // registers --kubeconfig, as in the controller

	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/demo"
	"github.com/landform-dev/landform/internal/devenv"
)

// The docs that name flags, values and reasons, from the repository root.
// docs/*.md is globbed.
var userDocs = []string{"README.md", "charts/landform/README.md", "charts/landform/values.yaml", "charts/landform/templates/NOTES.txt", "e2e/README.md"}

// foreignFlags are flags of other tools the docs show in commands: helm,
// kubectl, docker, Flux's kustomize-controller, kube-state-metrics.
var foreignFlags = map[string]bool{
	"set": true, "create-namespace": true, "reuse-values": true, "install": true, "values": true, // helm
	"server-side": true, "type": true, // kubectl
	"target": true, "build-arg": true, "platform": true, // docker
	"requeue-dependency":                true, // kustomize-controller
	"custom-resource-state-config-file": true, // kube-state-metrics
}

// chartDocFlags are the foreign flags the chart's docs may name: helm's,
// kubectl's for applying the CRDs, and kube-state-metrics' for the
// ConfigMap metrics.kubeStateMetrics creates.
var chartDocFlags = map[string]bool{"set": true, "create-namespace": true, "reuse-values": true, "install": true, "values": true, "namespace": true, "server-side": true,
	"custom-resource-state-config-file": true}

var flagRef = regexp.MustCompile("(?:^|[\\s`(\\[,'\"=])--([a-z][a-z0-9-]*[a-z0-9])")

// docFiles returns the user docs with their content.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	names := append([]string{}, userDocs...)
	md, err := filepath.Glob(path("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range md {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(m, repoRoot()+string(filepath.Separator))))
	}
	docs := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(path(strings.Split(n, "/")...))
		if err != nil {
			t.Fatal(err)
		}
		docs[n] = string(b)
	}
	return docs
}

// sourceFlags reads the flags a command's file registers on the flag set
// named set (the standard flag package, "flag", or a pflag.FlagSet
// variable): set.XxxVar(&v, "name", ...), set.Var(&v, "name", ...) and
// set.Xxx("name", ...).
func sourceFlags(t *testing.T, file, set string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path(strings.Split(file, "/")...), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != set {
			return true
		}
		i := 0
		if strings.HasSuffix(sel.Sel.Name, "Var") {
			i = 1
		}
		if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			name, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			flags[name] = true
		}
		return true
	})
	if len(flags) == 0 {
		t.Fatalf("no flags found in %s", file)
	}
	return flags
}

// controllerFlags are the flags landform-controller registers: its own
// (cmd/controller/flags.go), those of the fluxcd/pkg/runtime option types
// it binds, and --kubeconfig (ctrl.GetConfig's package registers it on the
// standard flag set, which main adds).
func controllerFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := sourceFlags(t, "cmd/controller/flags.go", "fs")
	src, err := os.ReadFile(path("cmd", "controller", "flags.go"))
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("flux", pflag.ContinueOnError)
	for bound, bind := range map[string]func(*pflag.FlagSet){
		"f.log.BindFlags(fs)":            (&logger.Options{}).BindFlags,
		"f.leaderElection.BindFlags(fs)": (&leaderelection.Options{}).BindFlags,
		"f.client.BindFlags(fs)":         (&runtimeclient.Options{}).BindFlags,
		"f.acl.BindFlags(fs)":            (&acl.Options{}).BindFlags,
		"f.jitter.BindFlags(fs)":         (&jitter.IntervalOptions{}).BindFlags,
	} {
		if strings.Contains(string(src), bound) {
			bind(fs)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
	main, err := os.ReadFile(path("cmd", "controller", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(main), "AddGoFlagSet(goflag.CommandLine)") && flag.CommandLine.Lookup("kubeconfig") != nil {
		flags["kubeconfig"] = true
	}
	return flags
}

// cliRoot is the landform command tree as cmd/landform builds it, dev and
// demo included.
func cliRoot() *cobra.Command {
	streams := genericiooptions.NewTestIOStreamsDiscard()
	dev := devenv.NewCommand(streams)
	dev.AddCommand(demo.NewCommand(streams))
	return cli.NewCommand(cli.Options{Streams: streams, Commands: []*cobra.Command{dev}})
}

// walkCLI calls visit for every command of the landform tree, the root
// first.
func walkCLI(visit func(c *cobra.Command)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cliRoot())
}

// cliFlags are the flags of every landform command, dev and demo included.
func cliFlags() map[string]bool {
	flags := map[string]bool{"help": true}
	walkCLI(func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
	})
	return flags
}

// cliCommands are the landform commands a user runs, by path without the
// root ("get", "plan show", "dev cloud ls"): not the groups that only
// hold others (plan, state, dev cloud). cobra adds help and completion
// when the command runs, so they are not among them.
func cliCommands(t *testing.T) []string {
	t.Helper()
	var paths []string
	walkCLI(func(c *cobra.Command) {
		if c.HasParent() && c.Runnable() && !c.Hidden {
			paths = append(paths, strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "))
		}
	})
	if len(paths) < 20 {
		t.Fatalf("found only %d landform commands: %v", len(paths), paths)
	}
	return paths
}

var (
	// commandWord is a word of a command's path in a usage line: `state
	// restore NAME` is the command state restore.
	commandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
	backquoted  = regexp.MustCompile("`([^`]+)`")
)

// TestCLICommandsDocumented: every landform command has a heading of its
// own in docs/cli.md ("## suspend, resume" heads two) and a row in the
// README's command table, and that table names no command that does not
// exist.
func TestCLICommandsDocumented(t *testing.T) {
	commands := cliCommands(t)
	docs := docFiles(t)
	headings := map[string]bool{}
	for _, line := range strings.Split(docs["docs/cli.md"], "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		for _, h := range strings.Split(strings.TrimLeft(line, "# "), ", ") {
			headings[strings.Trim(h, "`")] = true
		}
	}
	readme := docs["README.md"]
	start := strings.Index(readme, "\n## CLI\n")
	if start < 0 {
		t.Fatal("README.md has no section ## CLI")
	}
	table := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(readme[start:], "\n") {
		if line == "| command | what |" {
			inTable = true
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			break
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		// A cell's own | is written \|.
		first := strings.SplitN(strings.ReplaceAll(line, `\|`, "/"), "|", 3)[1]
		for _, m := range backquoted.FindAllStringSubmatch(first, -1) {
			var words []string
			for _, w := range strings.Fields(m[1]) {
				if !commandWord.MatchString(w) {
					break
				}
				words = append(words, w)
			}
			table[strings.Join(words, " ")] = true
		}
	}
	if len(table) == 0 {
		t.Fatal("README.md's CLI section has no table starting with | command | what |")
	}
	exists := map[string]bool{"completion": true} // cobra's, documented as ours are
	for _, c := range commands {
		exists[c] = true
		if !headings[c] {
			t.Errorf("docs/cli.md has no heading for the command %q", c)
		}
		if !table[c] {
			t.Errorf("README.md's CLI table has no row for the command %q", c)
		}
	}
	for c := range table {
		if !exists[c] {
			t.Errorf("README.md's CLI table names %q, which is no landform command", c)
		}
	}
}

// TestDocumentedFlagsExist: every --flag the docs name is a flag of
// landform-controller, landform-runner, the landform CLI or a tool the docs
// show (helm, kubectl, docker); the controller flags the chart's docs name
// and those in the README's flag tables are the controller's; and the
// README names every controller flag.
func TestDocumentedFlagsExist(t *testing.T) {
	controller := controllerFlags(t)
	runner := sourceFlags(t, "cmd/runner/main.go", "flag")
	landform := cliFlags()
	docs := docFiles(t)
	for name, text := range docs {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range flagRef.FindAllStringSubmatch(line, -1) {
				f := m[1]
				switch {
				case strings.HasPrefix(name, "charts/"):
					if !controller[f] && !chartDocFlags[f] {
						t.Errorf("%s:%d names --%s, which landform-controller does not define", name, i+1, f)
					}
				case name == "README.md" && strings.HasPrefix(line, "| `--"):
					if !controller[f] {
						t.Errorf("%s:%d: the flag table names --%s, which landform-controller does not define", name, i+1, f)
					}
				case !controller[f] && !runner[f] && !landform[f] && !foreignFlags[f]:
					t.Errorf("%s:%d names --%s, which neither landform-controller, landform-runner, the landform CLI nor helm/kubectl/docker define", name, i+1, f)
				}
			}
		}
	}
	documented := map[string]bool{}
	for _, m := range flagRef.FindAllStringSubmatch(docs["README.md"], -1) {
		documented[m[1]] = true
	}
	for f := range controller {
		if !documented[f] {
			t.Errorf("README.md does not document the controller flag --%s", f)
		}
	}
}

// reasonConstants reads the condition reasons of api/v1alpha1: the string
// constants whose names end in Reason.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path("api", "v1alpha1", "condition_types.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasSuffix(n.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					reasons[v] = n.Name
				}
			}
		}
	}
	if len(reasons) < 10 {
		t.Fatalf("found only %d reasons in api/v1alpha1/condition_types.go", len(reasons))
	}
	return reasons
}

var (
	reasonTableHeader = "| reason | condition |"
	reasonCell        = regexp.MustCompile("`([A-Za-z]+)`")
	reasonMention     = regexp.MustCompile("[Rr]easons? `([A-Za-z]+)`")
)

// TestDocumentedReasons: the README's reason table lists every condition
// reason of api/v1alpha1 and nothing else, and every "reason `X`" in the
// docs is one of them.
func TestDocumentedReasons(t *testing.T) {
	reasons := reasonConstants(t)
	docs := docFiles(t)
	readme := docs["README.md"]
	start := strings.Index(readme, reasonTableHeader)
	if start < 0 {
		t.Fatalf("README.md has no table starting with %q", reasonTableHeader)
	}
	var table []string
	for _, line := range strings.Split(readme[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range reasonCell.FindAllStringSubmatch(first, -1) {
			table = append(table, m[1])
		}
	}
	var want []string
	for v := range reasons {
		want = append(want, v)
	}
	sort.Strings(want)
	sort.Strings(table)
	if diff := cmp.Diff(want, table); diff != "" {
		t.Errorf("condition reasons (-api/v1alpha1 +README.md's reason table):\n%s", diff)
	}
	for name, text := range docs {
		if name == "e2e/README.md" {
			continue // it names Flux's reasons too
		}
		for i, line := range strings.Split(text, "\n") {
			for _, m := range reasonMention.FindAllStringSubmatch(line, -1) {
				if _, ok := reasons[m[1]]; !ok {
					t.Errorf("%s:%d names reason %s, which api/v1alpha1 does not define", name, i+1, m[1])
				}
			}
		}
	}
}

var (
	chartValueMention = regexp.MustCompile("chart values? `([A-Za-z][A-Za-z0-9.]*)`")
	backticked        = regexp.MustCompile("`([A-Za-z][A-Za-z0-9]*(?:\\.[A-Za-z][A-Za-z0-9]*)+)`")
	setFlag           = regexp.MustCompile(`--set\s+'?([^\s']+)`)
)

// hasValue reports whether the dotted path names a value (or a map of
// values) in values, or a key of a free-form map value ({} by default,
// such as serviceMonitor.labels).
func hasValue(values map[string]any, dotted string) bool {
	var cur any = values
	for i, k := range strings.Split(dotted, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if len(m) == 0 && i > 0 {
			return true
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// splitSet splits a --set argument into its keys: a=1,b={x,y} has a and b.
func splitSet(arg string) []string {
	var keys []string
	depth, start := 0, 0
	for i := 0; i <= len(arg); i++ {
		if i < len(arg) {
			switch arg[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if arg[i] != ',' || depth > 0 {
				continue
			}
		}
		k, _, _ := strings.Cut(arg[start:i], "=")
		keys = append(keys, k)
		start = i + 1
	}
	return keys
}

// TestDocumentedChartValuesExist: every chart value the docs name (as
// "chart value `x`", as a dotted `runner.x` whose first part is a
// top-level value, or in a helm --set) is in values.yaml. The chart
// README's table is checked both ways by TestChartValuesDocumented.
func TestDocumentedChartValuesExist(t *testing.T) {
	var values map[string]any
	readYAML(t, &values, "charts", "landform", "values.yaml")
	for name, text := range docFiles(t) {
		for i, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "a typo such as") {
				continue // the example of a value that does not exist
			}
			var named []string
			for _, m := range chartValueMention.FindAllStringSubmatch(line, -1) {
				named = append(named, m[1])
			}
			for _, m := range backticked.FindAllStringSubmatch(line, -1) {
				if first, _, _ := strings.Cut(m[1], "."); values[first] != nil {
					named = append(named, m[1])
				}
			}
			for _, m := range setFlag.FindAllStringSubmatch(line, -1) {
				named = append(named, splitSet(m[1])...)
			}
			for _, v := range named {
				if !hasValue(values, v) {
					t.Errorf("%s:%d names chart value %s, which charts/landform/values.yaml does not have", name, i+1, v)
				}
			}
		}
	}
}

// TestVersionFindsTheController: `landform version` looks for the
// controller Deployment by the labels the chart and config/manager set.
func TestVersionFindsTheController(t *testing.T) {
	sel, err := labels.Parse(cli.ControllerSelector)
	if err != nil {
		t.Fatal(err)
	}
	for source, objs := range map[string]func() []*appsv1.Deployment{
		"the chart": func() []*appsv1.Deployment {
			return []*appsv1.Deployment{into[appsv1.Deployment](t, find(t, helmTemplate(t), "Deployment", releaseNamespace, "landform-controller"))}
		},
		"config/default": func() []*appsv1.Deployment {
			return []*appsv1.Deployment{into[appsv1.Deployment](t, find(t, kustomizeBuild(t, "config/default"), "Deployment", "landform-system", "landform-controller"))}
		},
	} {
		for _, d := range objs() {
			if !sel.Matches(labels.Set(d.Labels)) {
				t.Errorf("%s labels Deployment %s %v: `landform version` (%s) does not find it", source, d.Name, d.Labels, cli.ControllerSelector)
			}
		}
	}
}

var (
	// eventRow is a row of an events listing quoted in the docs
	// (`landform status`, `landform events`, kubectl): TYPE then REASON.
	eventRow = regexp.MustCompile(`^\s*(?:\S+\s+)?(Normal|Warning)\s{2,}([A-Za-z]+)\s`)
	// conditionRow is a row of a conditions listing: TYPE STATUS REASON.
	conditionRow = regexp.MustCompile(`^\s*(Ready|Reconciling|Stalled|Planned|Applied|Drifted|StateLocked|OutputsWritten)\s+(True|False|Unknown)\s+([A-Za-z]+)\s`)
	// kubernetesEventReasons are the kubelet's and scheduler's reasons
	// that runner Pod events quoted in the docs carry.
	kubernetesEventReasons = map[string]bool{"Scheduled": true, "Pulling": true, "Pulled": true, "Created": true, "Started": true,
		"Killing": true, "BackOff": true, "Failed": true, "FailedScheduling": true}
)

// TestDocumentedExamplesUseRealReasons: the events and conditions that the
// docs quote as a command's output name reasons the controller writes (or
// the kubelet's, for runner Pods), so an example cannot drift from the
// code the way "Normal Planned" once did (the reason is ChangesPlanned).
func TestDocumentedExamplesUseRealReasons(t *testing.T) {
	reasons := reasonConstants(t)
	for name, text := range docFiles(t) {
		if name == "e2e/README.md" {
			continue // it quotes Flux's events too
		}
		for i, line := range strings.Split(text, "\n") {
			if m := eventRow.FindStringSubmatch(line); m != nil {
				if _, ok := reasons[m[2]]; !ok && !kubernetesEventReasons[m[2]] {
					t.Errorf("%s:%d quotes a %s event with reason %s, which neither api/v1alpha1 nor the kubelet writes", name, i+1, m[1], m[2])
				}
			}
			if m := conditionRow.FindStringSubmatch(line); m != nil {
				if _, ok := reasons[m[3]]; !ok {
					t.Errorf("%s:%d quotes condition %s with reason %s, which api/v1alpha1 does not define", name, i+1, m[1], m[3])
				}
			}
		}
	}
}
