package packaging

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
	line int
}

type stage struct {
	name, base string
	ins        []instruction
}

// dockerfile parses the Dockerfile into its global ARGs and its stages.
// It is no full parser: enough for the checks below.
func dockerfile(t *testing.T) (globalArgs map[string]string, stages []*stage) {
	t.Helper()
	f, err := os.Open(path("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	globalArgs = map[string]string{}
	sc := bufio.NewScanner(f)
	var cur strings.Builder
	start, n := 0, 0
	var all []instruction
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		all = append(all, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	for _, in := range all {
		switch {
		case in.cmd == "FROM":
			fields := strings.Fields(in.args)
			var base, name string
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					name = fields[i+1]
					i++
				default:
					base = fields[i]
				}
			}
			stages = append(stages, &stage{name: name, base: base})
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			globalArgs[k] = v
		case len(stages) == 0:
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		default:
			s := stages[len(stages)-1]
			s.ins = append(s.ins, in)
		}
	}
	return globalArgs, stages
}

func stageNamed(t *testing.T, stages []*stage, name string) *stage {
	t.Helper()
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("Dockerfile has no stage %q", name)
	return nil
}

func (s *stage) find(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// TestDockerfile checks what can be checked without a Docker engine: the
// targets exist and chain correctly (for every engine build argument),
// every COPY source is in the build context, the Go version builds every
// module of the repository, the engines are built exactly as hack/tools.sh
// builds them, and the images run as 65532 with the right entrypoints.
func TestDockerfile(t *testing.T) {
	args, stages := dockerfile(t)

	// Targets users and e2e/kind/run.sh build; the default (last) is the
	// controller.
	for _, name := range []string{"build", "provider", "runner", "runner-e2e", "e2e-gitserver", "controller"} {
		stageNamed(t, stages, name)
	}
	if last := stages[len(stages)-1].name; last != "controller" {
		t.Errorf("the default (last) target is %q, want controller", last)
	}

	// Every FROM names an image or an earlier stage, for each value of the
	// engine switches.
	earlier := map[string]bool{}
	for _, s := range stages {
		for _, tofu := range []string{"true", "false"} {
			for _, terraform := range []string{"true", "false"} {
				base := strings.NewReplacer("${WITH_TOFU}", tofu, "${WITH_TERRAFORM}", terraform).Replace(s.base)
				if strings.Contains(base, "${") {
					base = expand(t, base, args)
				}
				if !strings.Contains(base, ":") && !strings.Contains(base, "/") && !earlier[base] {
					t.Errorf("stage %q is FROM %q, which is neither an image nor an earlier stage", s.name, base)
				}
			}
		}
		for _, c := range s.find("COPY") {
			checkCopy(t, s, c, earlier)
		}
		earlier[s.name] = true
	}
	for _, sw := range []string{"WITH_TOFU", "WITH_TERRAFORM"} {
		if v := args[sw]; v != "true" && v != "false" {
			t.Errorf("ARG %s=%q: want true or false (it selects the stage %s-<value>)", sw, v, strings.ToLower(strings.TrimPrefix(sw, "WITH_")))
		}
	}
	if args["WITH_TOFU"] != "true" || args["WITH_TERRAFORM"] != "false" {
		t.Errorf("the runner image carries OpenTofu, not Terraform, by default: WITH_TOFU=%s WITH_TERRAFORM=%s", args["WITH_TOFU"], args["WITH_TERRAFORM"])
	}

	// The toolchain: the one `make tools` and `make build` use here, and
	// new enough for every module the image builds.
	goVersion := args["GO_VERSION"]
	if local := strings.TrimPrefix(runtime.Version(), "go"); goVersion != local {
		t.Errorf("Dockerfile GO_VERSION %s, but this repository builds with Go %s", goVersion, local)
	}
	for _, mod := range []string{"go.mod", "api/go.mod", "providers/landform/go.mod", "hack/tools/tofu/go.mod", "hack/tools/terraform/go.mod"} {
		b, err := os.ReadFile(path(filepath.FromSlash(mod)))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no go directive", mod)
		}
		if compareGo(goVersion, string(m[1])) < 0 {
			t.Errorf("%s needs go %s, newer than the image's GO_VERSION %s (GOTOOLCHAIN=local)", mod, m[1], args["GO_VERSION"])
		}
	}

	// The engines, built as hack/tools.sh builds them.
	script := toolsScript(t)
	if !strings.Contains(script, `go build -trimpath -ldflags "-s -w $ldflags"`) {
		t.Fatal("hack/tools.sh's wrapper_build no longer builds with -trimpath -ldflags \"-s -w $ldflags\": update this test and the Dockerfile together")
	}
	for _, engine := range []string{"tofu", "terraform"} {
		m := regexp.MustCompile(`wrapper_build "` + engine + `-\$\w+" ` + engine + ` (\S+) ([^\s;]+)(?: \\\s*"([^"]*)")?`).FindStringSubmatch(script)
		if m == nil {
			t.Fatalf("cannot find how hack/tools.sh builds %s", engine)
		}
		wrapper, pkg, ldflags := m[1], m[2], strings.TrimSpace("-s -w "+m[3])
		s := stageNamed(t, stages, engine+"-true")
		var build string
		for _, r := range s.find("RUN") {
			if strings.Contains(r.args, "go build") {
				build = r.args
			}
		}
		want := []string{
			"cd hack/tools/" + wrapper + " ",
			`go build -trimpath -ldflags "` + ldflags + `" -o /out/` + engine + " " + pkg,
		}
		for _, w := range want {
			if !strings.Contains(build, w) {
				t.Errorf("stage %s-true does not build as hack/tools.sh does: want %q in\n%s", engine, w, build)
			}
		}
		copied := false
		for _, c := range s.find("COPY") {
			copied = copied || strings.HasPrefix(c.args, "hack/tools/"+wrapper+"/ ")
		}
		if !copied {
			t.Errorf("stage %s-true does not copy the wrapper module hack/tools/%s/", engine, wrapper)
		}
	}

	// Who the images run as, and what.
	for name, entry := range map[string]string{
		"controller":    `["/usr/local/bin/landform-controller"]`,
		"runner":        `["/usr/local/bin/landform-runner"]`,
		"e2e-gitserver": `["/usr/local/bin/e2e-gitserver"`,
	} {
		s := stageNamed(t, stages, name)
		if u := s.find("USER"); len(u) == 0 || u[len(u)-1].args != "65532:65532" {
			t.Errorf("stage %s: USER %v, want 65532:65532", name, u)
		}
		if e := s.find("ENTRYPOINT"); len(e) == 0 || !strings.HasPrefix(e[len(e)-1].args, entry) {
			t.Errorf("stage %s: ENTRYPOINT %v, want %s", name, e, entry)
		}
	}
	runner := stageNamed(t, stages, "runner")
	if !hasInstruction(runner, "ENV", "HOME=/tmp") {
		t.Error("the runner image must set HOME=/tmp (its root filesystem is read-only; /tmp is an emptyDir)")
	}
	if !strings.HasPrefix(runner.base, "alpine:") || !hasInstruction(runner, "RUN", "ca-certificates") || !hasInstruction(runner, "RUN", "git") {
		t.Errorf("the runner image needs a shell (local-exec), git (git:: module sources) and CA roots: FROM %s", runner.base)
	}
	for _, src := range []string{"tofu", "terraform"} {
		if !hasInstruction(runner, "COPY", "--from="+src+" /out/ /usr/local/bin/") {
			t.Errorf("the runner image does not copy the %s stage's engine into /usr/local/bin", src)
		}
	}
	// runner-e2e's provider mirror is where the kind installation points
	// the controller.
	var kindValues struct {
		Runner struct {
			ProviderMirrors []string `json:"providerMirrors"`
		} `json:"runner"`
	}
	readYAML(t, &kindValues, "e2e", "kind", "values.yaml")
	if len(kindValues.Runner.ProviderMirrors) != 1 || !hasInstruction(stageNamed(t, stages, "runner-e2e"), "COPY", "/out/providers "+kindValues.Runner.ProviderMirrors[0]) {
		t.Errorf("runner-e2e does not put the provider mirror where e2e/kind/values.yaml says: %v", kindValues.Runner.ProviderMirrors)
	}
}

func hasInstruction(s *stage, cmd, substr string) bool {
	for _, in := range s.find(cmd) {
		if strings.Contains(in.args, substr) {
			return true
		}
	}
	return false
}

func expand(t *testing.T, s string, args map[string]string) string {
	return regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(s, func(v string) string {
		name := v[2 : len(v)-1]
		val, ok := args[name]
		if !ok {
			t.Errorf("Dockerfile: %s is not a global ARG", v)
		}
		return val
	})
}

// checkCopy: a COPY from the context names files that exist and that
// .dockerignore keeps; a COPY --from names an earlier stage.
func checkCopy(t *testing.T, s *stage, c instruction, earlier map[string]bool) {
	t.Helper()
	fields := strings.Fields(c.args)
	var srcs []string
	from := ""
	for _, f := range fields {
		switch {
		case strings.HasPrefix(f, "--from="):
			from = strings.TrimPrefix(f, "--from=")
		case strings.HasPrefix(f, "--"):
		default:
			srcs = append(srcs, f)
		}
	}
	if len(srcs) < 2 {
		t.Errorf("Dockerfile:%d: COPY %s: want sources and a destination", c.line, c.args)
		return
	}
	srcs = srcs[:len(srcs)-1]
	if from != "" {
		if !earlier[from] {
			t.Errorf("Dockerfile:%d: COPY --from=%s in stage %s: no earlier stage of that name", c.line, from, s.name)
		}
		return
	}
	ignored := dockerignore(t)
	for _, src := range srcs {
		if src == "." {
			continue
		}
		if _, err := os.Stat(path(filepath.FromSlash(strings.TrimSuffix(src, "/")))); err != nil {
			t.Errorf("Dockerfile:%d: COPY source %s is not in the repository", c.line, src)
		}
		top := strings.Split(strings.TrimSuffix(src, "/"), "/")[0]
		if ignored[top] {
			t.Errorf("Dockerfile:%d: COPY source %s is excluded by .dockerignore", c.line, src)
		}
	}
}

// dockerignore returns the plain top-level names .dockerignore excludes.
func dockerignore(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path(".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v (without it the context carries bin/ and .git)", err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			ignored[strings.TrimSuffix(l, "/")] = true
		}
	}
	return ignored
}

func TestDockerignoreKeepsBinAndGitOut(t *testing.T) {
	ignored := dockerignore(t)
	for _, name := range []string{"bin", ".git"} {
		if !ignored[name] {
			t.Errorf(".dockerignore does not exclude %s", name)
		}
	}
}

// compareGo compares Go versions such as 1.26 and 1.26.8.
func compareGo(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}
