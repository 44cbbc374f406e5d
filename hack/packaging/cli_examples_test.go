package packaging

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cliTranscript is a golden file of internal/cli's tests, as transcript()
// in internal/cli/main_test.go writes it: the command line, [stdin] (one
// line: the answer to a question), stdout, then [stderr], [error] and
// [exit N] when there are any.
type cliTranscript struct {
	file                         string // from the repository root
	command                      string // "$ landform get -n get"
	stdin, stdout, stderr, error string
	hasError                     bool
}

var transcriptSection = regexp.MustCompile(`^\[(stderr|error|exit \d+)\]$`)

// cliGoldens reads every golden file under internal/cli/testdata whose
// first line is a landform command line, by that line.
func cliGoldens(t *testing.T) map[string][]cliTranscript {
	t.Helper()
	goldens := map[string][]cliTranscript{}
	root := path("internal", "cli", "testdata")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".golden") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines := strings.SplitAfter(string(b), "\n")
		first := strings.TrimSuffix(lines[0], "\n")
		if !cliCommandLine.MatchString(first) {
			return nil // not a transcript (get -w's rows)
		}
		g := cliTranscript{file: filepath.ToSlash(strings.TrimPrefix(p, repoRoot()+string(filepath.Separator))), command: first}
		rest := lines[1:]
		if len(rest) >= 2 && rest[0] == "[stdin]\n" {
			g.stdin, rest = rest[1], rest[2:]
		}
		section := &g.stdout
		for _, l := range rest {
			if m := transcriptSection.FindStringSubmatch(strings.TrimSuffix(l, "\n")); m != nil {
				switch {
				case m[1] == "stderr":
					section = &g.stderr
				case m[1] == "error":
					section, g.hasError = &g.error, true
				default:
					section = new(string)
				}
				continue
			}
			*section += l
		}
		goldens[first] = append(goldens[first], g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(goldens) < 50 {
		t.Fatalf("found only %d golden command lines under %s", len(goldens), root)
	}
	return goldens
}

// goldenTimestamps reads how internal/cli's normalize() hides times in
// goldens: the pattern of its var timestamps and the replacement it
// passes, so that the docs are read by the same rule and it is written
// once.
func goldenTimestamps(t *testing.T) (*regexp.Regexp, string) {
	t.Helper()
	file := path("internal", "cli", "main_test.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pattern, replacement string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			if len(n.Names) == 1 && n.Names[0].Name == "timestamps" && len(n.Values) == 1 {
				if call, ok := n.Values[0].(*ast.CallExpr); ok && len(call.Args) == 1 {
					pattern = stringLit(t, call.Args[0])
				}
			}
		case *ast.FuncDecl:
			if n.Name.Name != "normalize" {
				return false
			}
			ast.Inspect(n.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && len(call.Args) == 2 {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "ReplaceAllString" {
						replacement = stringLit(t, call.Args[1])
					}
				}
				return true
			})
		}
		return true
	})
	if pattern == "" || replacement == "" {
		t.Fatalf("%s: found no var timestamps = regexp.MustCompile(`…`) and normalize() calling timestamps.ReplaceAllString(s, \"…\")", file)
	}
	return regexp.MustCompile(pattern), replacement
}

func stringLit(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	// cliCommandLine is a landform command line as a shell prompt shows
	// it, with the binary under any of its names.
	cliCommandLine = regexp.MustCompile(`^\$ (?:kubectl |flux )?landform(?: |$)`)
	// stdoutToFile is a command line whose stdout goes to a file.
	stdoutToFile = regexp.MustCompile(`^(.*\S)\s+>\s*\S+$`)
)

// fencedBlocks returns the fenced code blocks of a Markdown text: their
// lines, and the line number (from 1) of each block's first line.
func fencedBlocks(text string) (blocks [][]string, starts []int) {
	var cur []string
	in := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if in {
				blocks = append(blocks, cur)
			} else {
				cur = nil
				starts = append(starts, i+2)
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return blocks, starts[:len(blocks)]
}

// TestCLIExamplesAreGoldens: every example of docs/cli.md that shows a
// landform command and what it prints is what a golden file of
// internal/cli's tests holds for that command line, so that an example
// cannot drift from what the CLI prints.
//
// An example is a fenced block whose first line is a prompt and a
// landform command, `$ landform ARGS` (`$ kubectl landform` and `$ flux
// landform` too: no golden is written under those names, so such an
// example fails until one is). A block holding several is cut at each
// line starting with `$ `, and each part checked. A part is its command
// line and the lines up to the next one; it must equal, for some golden
// under internal/cli/testdata (any depth) whose first line is that
// command line:
//
//   - the golden's stdout (its lines before [stderr], [error] or
//     [exit N]);
//   - or that stdout followed by `error: MESSAGE`, as a terminal shows the
//     golden's [error] after it, when the golden has no [stderr] (whose
//     place among stdout's lines a golden does not record);
//   - when the golden has a [stdin] (an answer to the `[y/N]: `
//     question), the answer is shown where a terminal echoes it: after
//     `[y/N]: `;
//   - for `$ landform ARGS > FILE`, stdout goes to the file, and the part
//     is the golden's [stderr] for `$ landform ARGS`.
//
// Both texts are compared after the normalisation internal/cli's
// normalize() applies to goldens, read from its source: an RFC 3339 time
// in the docs (2026-03-02T10:14:02Z) stands for a TIME in the golden.
// Nothing else may differ: names, namespaces and elided lines included.
//
// Skipped, because what they show is not landform's output alone: a
// block whose first line is a pipeline (`$ landform … | jq …`) or another
// tool's command (`$ git diff`). Within an example, every part must be a
// landform command without a pipe: show another tool in a block of its
// own. Blocks without a prompt (synopses, scripts to copy, excerpts of
// output) are not examples.
func TestCLIExamplesAreGoldens(t *testing.T) {
	const doc = "docs/cli.md"
	text := docFiles(t)[doc]
	goldens := cliGoldens(t)
	times, timeMark := goldenTimestamps(t)
	normalize := func(s string) string { return times.ReplaceAllString(s, timeMark) }

	checked := 0
	blocks, starts := fencedBlocks(text)
	for b, block := range blocks {
		if len(block) == 0 || !cliCommandLine.MatchString(block[0]) || strings.Contains(block[0], "|") {
			continue
		}
		// Cut the block at each prompt.
		var cuts []int
		for i, l := range block {
			if strings.HasPrefix(l, "$ ") {
				cuts = append(cuts, i)
			}
		}
		cuts = append(cuts, len(block))
		for c := 0; c+1 < len(cuts); c++ {
			part, line := block[cuts[c]:cuts[c+1]], starts[b]+cuts[c]
			command, shown := part[0], normalize(strings.Join(part[1:], "\n")+"\n")
			if len(part) == 1 {
				shown = ""
			}
			if !cliCommandLine.MatchString(command) || strings.Contains(command, "|") {
				t.Errorf("%s:%d: %q in an example of landform's output: show it in a block of its own", doc, line, command)
				continue
			}
			checked++
			toFile := false
			if m := stdoutToFile.FindStringSubmatch(command); m != nil {
				command, toFile = m[1], true
			}
			candidates := goldens[command]
			if len(candidates) == 0 {
				t.Errorf("%s:%d: no golden under internal/cli/testdata has the command line %q: show a golden's command line and what it prints, "+
					"or add a case that runs it to internal/cli's tests (go test ./internal/cli/ -run 'TestX/case' -update)", doc, line, command)
				continue
			}
			var diffs []string
			for _, g := range candidates {
				texts := printed(g, toFile)
				if slices.ContainsFunc(texts, func(w string) bool { return normalize(w) == shown }) {
					diffs = nil
					break
				}
				// Compared with the text the example means to show: with
				// the error when its last line is one.
				want := normalize(texts[0])
				if shownLines := strings.Split(strings.TrimSuffix(shown, "\n"), "\n"); strings.HasPrefix(shownLines[len(shownLines)-1], "error: ") {
					want = normalize(texts[len(texts)-1])
				}
				diffs = append(diffs, g.file+" (-golden +docs):\n"+cmp.Diff(strings.Split(want, "\n"), strings.Split(shown, "\n")))
			}
			if diffs != nil {
				what := "stdout"
				if toFile {
					what = "[stderr] (its stdout goes to the file)"
				}
				t.Errorf("%s:%d: the example of %q is not the %s of a golden with that command line: show what the golden holds, "+
					"or change the case that writes it (see TestCLIExamplesAreGoldens for what may differ); compared with %s",
					doc, line, command, what, strings.Join(diffs, "\n"))
			}
		}
	}
	if checked < 10 {
		t.Fatalf("%s: checked only %d examples", doc, checked)
	}
	t.Logf("%s: checked %d examples", doc, checked)
}

// printed is what a terminal shows of golden g that an example may show:
// its stdout (its [stderr] for a command whose stdout goes to a file),
// with the answer to the question where it was typed; then, when g has
// an [error] and no [stderr], that stdout with the error last.
func printed(g cliTranscript, toFile bool) []string {
	if toFile {
		return []string{g.stderr}
	}
	out := g.stdout
	if g.stdin != "" {
		out = strings.Replace(out, "[y/N]: ", "[y/N]: "+g.stdin, 1)
	}
	if g.hasError && g.stderr == "" {
		return []string{out, out + "error: " + g.error}
	}
	return []string{out}
}
