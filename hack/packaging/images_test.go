package packaging

import (
	"encoding/json"
	pathpkg "path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// imagesSpec is the part of hack/images/images.yaml this test compares with
// the Dockerfile. (The builder, hack/images, is a module of its own and
// reads the whole file.)
type imagesSpec struct {
	Bases map[string]struct {
		Packages map[string]struct {
			Files   map[string]json.RawMessage `json:"files"`
			Missing string                     `json:"missing"`
		} `json:"packages"`
	} `json:"bases"`
	NotBuilt map[string]string `json:"notBuilt"`
	Images   []specImage       `json:"images"`
}

type specImage struct {
	Name     string   `json:"name"`
	Target   string   `json:"target"`
	Base     string   `json:"base"`
	From     string   `json:"from"`
	Packages []string `json:"packages"`
	Copies   []struct {
		Dockerfile string                     `json:"dockerfile"`
		Files      map[string]json.RawMessage `json:"files"`
	} `json:"copies"`
	User       string            `json:"user"`
	Env        map[string]string `json:"env"`
	Expose     []int             `json:"expose"`
	Entrypoint []string          `json:"entrypoint"`
}

// imageContent is what an image is made of, as either side says it.
type imageContent struct {
	Base       string
	Copies     []string
	Packages   []string
	User       string
	Env        map[string]string
	Expose     []string
	Entrypoint []string
}

// TestImagesMatchDockerfile: hack/images builds the images without Docker
// from images.yaml; the Dockerfile builds them with Docker. For every image
// with a Dockerfile target, the target (with the stages it is FROM) must
// have exactly the COPY lines, base image, packages, USER, ENV, EXPOSE and
// ENTRYPOINT images.yaml lists, and each COPY's destination must be where
// images.yaml puts its files. Every image target of the Dockerfile is built
// by hack/images or listed in notBuilt with a reason.
func TestImagesMatchDockerfile(t *testing.T) {
	_, stages := dockerfile(t)
	var spec imagesSpec
	readYAML(t, &spec, "hack", "images", "images.yaml")

	byName := map[string]specImage{}
	targets := map[string]bool{}
	for _, img := range spec.Images {
		byName[img.Name] = img
		if img.Target != "" {
			targets[img.Target] = true
		}
	}
	for _, target := range []string{"controller", "runner", "runner-e2e", "e2e-gitserver"} {
		if !targets[target] && spec.NotBuilt[target] == "" {
			t.Errorf("Dockerfile target %s is neither built by hack/images (images.yaml) nor listed in its notBuilt with a reason", target)
		}
		if targets[target] && spec.NotBuilt[target] != "" {
			t.Errorf("images.yaml builds target %s and lists it in notBuilt", target)
		}
	}

	for _, img := range spec.Images {
		if img.Target == "" {
			continue
		}
		t.Run(img.Name, func(t *testing.T) {
			want := flattenSpecImage(t, byName, img)
			got := dockerfileImage(t, stages, img.Target)
			if img.From != "" {
				if s := stageNamed(t, stages, img.Target); s.base != byName[img.From].Target {
					t.Errorf("images.yaml builds %s from image %s (target %s), but the Dockerfile's %s is FROM %s", img.Name, img.From, byName[img.From].Target, img.Target, s.base)
				}
			}
			if got.Base != want.Base {
				t.Errorf("base image: Dockerfile %q, images.yaml %q", got.Base, want.Base)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"COPY", got.Copies, want.Copies},
				{"packages", got.Packages, want.Packages},
				{"EXPOSE", got.Expose, want.Expose},
				{"ENTRYPOINT", got.Entrypoint, want.Entrypoint},
			} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s differs:\n  Dockerfile  %q\n  images.yaml %q", c.what, c.got, c.want)
				}
			}
			if got.User != want.User {
				t.Errorf("USER: Dockerfile %q, images.yaml %q", got.User, want.User)
			}
			if !mapsEqual(got.Env, want.Env) {
				t.Errorf("ENV: Dockerfile %v, images.yaml %v", got.Env, want.Env)
			}

			// Each base package is provided or said to be missing.
			base := spec.Bases[want.Base]
			for _, p := range want.Packages {
				pkg, ok := base.Packages[p]
				switch {
				case !ok:
					t.Errorf("package %s: images.yaml's base %s does not say how hack/images provides it", p, want.Base)
				case len(pkg.Files) == 0 && pkg.Missing == "":
					t.Errorf("package %s: no files and no reason why it is missing", p)
				}
			}
		})
	}
}

// Each COPY puts its files where the Dockerfile line says.
func TestImagesCopyDestinations(t *testing.T) {
	var spec imagesSpec
	readYAML(t, &spec, "hack", "images", "images.yaml")
	for _, img := range spec.Images {
		for _, c := range img.Copies {
			if c.Dockerfile == "" {
				if img.Target != "" {
					t.Errorf("image %s (target %s) has a copy without its Dockerfile COPY line", img.Name, img.Target)
				}
				continue
			}
			fields := strings.Fields(c.Dockerfile)
			var srcs []string
			for _, f := range fields[:len(fields)-1] {
				if !strings.HasPrefix(f, "--") {
					srcs = append(srcs, f)
				}
			}
			dest := fields[len(fields)-1]
			for file := range c.Files {
				ok := false
				switch {
				case strings.HasSuffix(dest, "/"):
					// Into a directory: the sources' names (or, for a
					// source directory, what it holds) land there.
					ok = pathpkg.Dir(file) == strings.TrimSuffix(dest, "/")
					if ok && len(srcs) == 1 && !strings.HasSuffix(srcs[0], "/") {
						ok = pathpkg.Base(file) == pathpkg.Base(srcs[0])
					}
				default:
					ok = file == dest
				}
				if !ok {
					t.Errorf("image %s: images.yaml puts %s where `COPY %s` does not", img.Name, file, c.Dockerfile)
				}
			}
		}
	}
}

func flattenSpecImage(t *testing.T, byName map[string]specImage, img specImage) imageContent {
	t.Helper()
	var out imageContent
	if img.From != "" {
		parent, ok := byName[img.From]
		if !ok {
			t.Fatalf("image %s is from %q, which images.yaml does not have", img.Name, img.From)
		}
		out = flattenSpecImage(t, byName, parent)
	}
	if img.Base != "" {
		out.Base = img.Base
	}
	for _, c := range img.Copies {
		out.Copies = append(out.Copies, c.Dockerfile)
	}
	out.Packages = append(out.Packages, img.Packages...)
	sort.Strings(out.Packages)
	if img.User != "" {
		out.User = img.User
	}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	for k, v := range img.Env {
		out.Env[k] = v
	}
	for _, p := range img.Expose {
		out.Expose = append(out.Expose, itoa(p))
	}
	if img.Entrypoint != nil {
		out.Entrypoint = img.Entrypoint
	}
	return out
}

// dockerfileImage follows target's FROM chain through earlier stages to
// its base image and gathers what the chain puts into the image.
func dockerfileImage(t *testing.T, stages []*stage, target string) imageContent {
	t.Helper()
	var chain []*stage
	for s := stageNamed(t, stages, target); ; {
		chain = append([]*stage{s}, chain...)
		next := findStage(stages, s.base)
		if next == nil {
			break
		}
		s = next
	}
	out := imageContent{Base: chain[0].base, Env: map[string]string{}}
	for _, s := range chain {
		for _, in := range s.ins {
			switch in.cmd {
			case "COPY":
				out.Copies = append(out.Copies, in.args)
			case "USER":
				out.User = in.args
			case "ENV":
				for _, kv := range strings.Fields(in.args) {
					k, v, _ := strings.Cut(kv, "=")
					out.Env[k] = v
				}
			case "EXPOSE":
				out.Expose = append(out.Expose, strings.Fields(in.args)...)
			case "ENTRYPOINT":
				out.Entrypoint = nil
				if err := json.Unmarshal([]byte(in.args), &out.Entrypoint); err != nil {
					t.Errorf("stage %s: ENTRYPOINT %s is not the exec (JSON) form: %v", s.name, in.args, err)
				}
			case "RUN":
				out.Packages = append(out.Packages, apkPackages(in.args)...)
			}
		}
	}
	sort.Strings(out.Packages)
	return out
}

func findStage(stages []*stage, name string) *stage {
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// apkPackages returns the packages of an `apk add` in a RUN line.
func apkPackages(run string) []string {
	var out []string
	for _, cmd := range strings.Split(run, "&&") {
		f := strings.Fields(cmd)
		if len(f) < 2 || f[0] != "apk" || f[1] != "add" {
			continue
		}
		for _, a := range f[2:] {
			if !strings.HasPrefix(a, "-") {
				out = append(out, a)
			}
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
