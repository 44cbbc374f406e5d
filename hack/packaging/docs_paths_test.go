package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// docsCitingCode are the documents that cite the repository's files and
// tests.
func docsCitingCode(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(path("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, path("README.md"), path("CHANGELOG.md"), path("charts", "landform", "README.md"),
		path("e2e", "README.md"), path("e2e", "cluster", "README.md"))
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(f, repoRoot()+"/")] = string(b)
	}
	return out
}

var (
	// citedPath is a repository path in backquotes: a file or directory
	// under one of the repository's top directories.
	citedPath = regexp.MustCompile("`((?:api|charts|cmd|config|controllers|docs|e2e|hack|internal|modules|providers|runner)/[A-Za-z0-9_./-]+)`")
	// citedTest is a Go test name in backquotes, with an optional subtest.
	citedTest = regexp.MustCompile("`(Test[A-Z][A-Za-z0-9_]*)(?:/[^`]*)?`")
	// notAPath is what looks like a path but names something else: a Go
	// identifier (internal/cloud.Client) or a check of `landform check`
	// (api/Kustomization): the repository's directories are lower case.
	notAPath = regexp.MustCompile(`\.[A-Z]|^[a-z]+/[A-Z]`)
)

// TestDocumentedPathsAndTestsExist: every repository path and every test
// the docs cite exists, so that a renamed file or test cannot leave a
// reference behind (as docs/scaling.md once cited a test file that was
// never there).
func TestDocumentedPathsAndTestsExist(t *testing.T) {
	var tests strings.Builder
	err := filepath.WalkDir(repoRoot(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tests.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	allTests := tests.String()
	for doc, text := range docsCitingCode(t) {
		for _, m := range citedPath.FindAllStringSubmatch(text, -1) {
			p := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(p, "<>*…") || strings.Contains(p, "...") || notAPath.MatchString(p) {
				continue
			}
			if _, err := os.Stat(path(p)); err != nil {
				t.Errorf("%s cites %s, which does not exist", doc, m[1])
			}
		}
		for _, m := range citedTest.FindAllStringSubmatch(text, -1) {
			if !strings.Contains(allTests, "func "+m[1]+"(") {
				t.Errorf("%s cites test %s, which no _test.go file defines", doc, m[1])
			}
		}
	}
}

// allNamespacesList is how the docs list the commands that take -A, in
// the sentence that says it is their own flag: "(`get`, `events`, ...)".
var allNamespacesList = regexp.MustCompile("\\((`[a-z ]+`(?:,\\s+`[a-z ]+`)*)\\)")

// ownFlag is that sentence's words.
var ownFlag = regexp.MustCompile(`(?:its|their) own flag`)

// TestDocumentedAllNamespacesCommands: the commands the README and
// docs/cli.md say take -A are exactly those that have it (-A is no
// kubeconfig flag).
func TestDocumentedAllNamespacesCommands(t *testing.T) {
	var want []string
	walkCLI(func(c *cobra.Command) {
		if c.Flags().Lookup("all-namespaces") != nil && c.HasParent() {
			want = append(want, strings.TrimPrefix(c.CommandPath(), "landform "))
		}
	})
	slices.Sort(want)
	docs := docFiles(t)
	for _, doc := range []string{"README.md", "docs/cli.md"} {
		text := docs[doc]
		at := -1
		if loc := ownFlag.FindStringIndex(text); loc != nil {
			at = loc[0]
		}
		var m []string
		if at >= 0 {
			m = allNamespacesList.FindStringSubmatch(text[max(0, at-200):min(len(text), at+200)])
		}
		if m == nil {
			t.Errorf("%s does not list the commands that take -A", doc)
			continue
		}
		var got []string
		for _, b := range backquoted.FindAllStringSubmatch(m[1], -1) {
			got = append(got, b[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %v as the commands taking -A; they are %v", doc, got, want)
		}
	}
}

// TestDocumentedStateSecretName: the docs name the state Secret after the
// secret suffix, which only defaults to the object's name
// (tfstate-<workspace>-<name> was wrong wherever backendConfig.secretSuffix
// is set).
func TestDocumentedStateSecretName(t *testing.T) {
	wrong := regexp.MustCompile(`tfstate-<workspace>-<name>|tfstate-WORKSPACE-NAME`)
	for doc, text := range docsCitingCode(t) {
		if loc := wrong.FindStringIndex(text); loc != nil {
			t.Errorf("%s line %d names the state Secret %q: it is tfstate-<workspace>-<secretSuffix> (the suffix defaults to the name)",
				doc, strings.Count(text[:loc[0]], "\n")+1, text[loc[0]:loc[1]])
		}
	}
}
