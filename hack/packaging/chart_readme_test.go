package packaging

import (
	"os"
	"strings"
	"testing"
)

// shellWords splits a shell command line as sh would for what the docs
// write: words separated by blanks, single quotes kept together, a
// backslash at the end of a line continuing it.
func shellWords(cmd string) []string {
	cmd = strings.ReplaceAll(cmd, "\\\n", " ")
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range cmd {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestChartReadmeInstallAsWritten runs the chart README's first `helm
// install`, word for word but for its placeholders REPO and TAG, against
// the test API server (--dry-run=server: every object is validated by
// the API server, nothing is kept): it installs, the controller and the
// runners run the images it names (not the chart's unpublished
// defaults), and each runner namespace it names gets its ServiceAccount.
func TestChartReadmeInstallAsWritten(t *testing.T) {
	readme, err := os.ReadFile(path("charts", "landform", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := fencedBlocks(string(readme))
	var words []string
	for _, b := range blocks {
		if len(b) > 0 && strings.HasPrefix(b[0], "helm install ") {
			words = shellWords(strings.Join(b, "\n"))
			break
		}
	}
	if len(words) < 3 {
		t.Fatal("charts/landform/README.md has no `helm install` block")
	}
	for i, w := range words {
		words[i] = strings.NewReplacer("REPO", "registry.example/acme", "TAG", "v1.2.3").Replace(w)
	}
	for _, n := range []string{"team-a", "team-b"} {
		ensureNamespace(t, n, nil)
	}
	out, err := runErr(helmEnv(t), helmBin(t), append(words[1:], "--kubeconfig", kubeconfig(t, ""), "--dry-run=server")...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(words, " "), err)
	}
	for _, want := range []string{
		`image: "registry.example/acme/landform-controller:v1.2.3"`,
		`"--runner-image=registry.example/acme/landform-runner:v1.2.3"`,
		"Terraform objects can run in: team-a, team-b",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's helm install does not give %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ghcr.io/landform-dev") {
		t.Errorf("the README's helm install still runs the chart's unpublished default images:\n%s", out)
	}
}

func TestShellWords(t *testing.T) {
	got := shellWords("helm install landform charts/landform \\\n  --set 'runner.namespaces={team-a,team-b}' --set a=b")
	want := []string{"helm", "install", "landform", "charts/landform", "--set", "runner.namespaces={team-a,team-b}", "--set", "a=b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellWords = %q, want %q", got, want)
	}
}
