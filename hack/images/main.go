// Command images builds Landform's container images without Docker, as OCI
// image tarballs (go-containerregistry), from the one list of their content
// in images.yaml, and imports them into a containerd (`make images`).
//
//	go run . [--root DIR] [--out DIR] [--address SOCKET] [--version V] [--spec FILE] [NAME...]
//
// Every binary in an image is static: Go programs are built with
// CGO_ENABLED=0, and files taken from bin/ or the machine are checked.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// Spec is images.yaml.
type Spec struct {
	Bases map[string]Base `json:"bases"`
	// NotBuilt names Dockerfile targets this build does not make, and why.
	NotBuilt map[string]string `json:"notBuilt,omitempty"`
	Images   []Image           `json:"images"`
}

// Base is what a base image of the Dockerfile provides.
type Base struct {
	// Busybox, when set, is the path of a busybox binary whose applets are
	// linked into the image (Alpine's userland).
	Busybox  string             `json:"busybox,omitempty"`
	Files    map[string]Source  `json:"files,omitempty"`
	Dirs     []string           `json:"dirs,omitempty"`
	Env      map[string]string  `json:"env,omitempty"`
	Packages map[string]Package `json:"packages,omitempty"`
}

// Package is what a package the Dockerfile installs provides, or why this
// build cannot provide it.
type Package struct {
	Files   map[string]Source `json:"files,omitempty"`
	Missing string            `json:"missing,omitempty"`
}

// Image is one image and its Dockerfile target.
type Image struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Target string `json:"target,omitempty"`
	Base   string `json:"base,omitempty"`
	// From names an earlier image this one extends (a Dockerfile target
	// FROM another target).
	From       string            `json:"from,omitempty"`
	Packages   []string          `json:"packages,omitempty"`
	Copies     []Copy            `json:"copies,omitempty"`
	User       string            `json:"user,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Expose     []int             `json:"expose,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
}

// Copy is one COPY of the Dockerfile and the files it puts in the image.
type Copy struct {
	Dockerfile string            `json:"dockerfile,omitempty"`
	Files      map[string]Source `json:"files,omitempty"`
}

// Source says where a file's content comes from; exactly one is set.
type Source struct {
	Go     string `json:"go,omitempty"`
	Bin    string `json:"bin,omitempty"`
	Host   string `json:"host,omitempty"`
	Mirror string `json:"mirror,omitempty"`
	Text   string `json:"text,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	wd, _ := os.Getwd()
	root := flag.String("root", filepath.Join(wd, "..", ".."), "the repository")
	out := flag.String("out", "", "where the tarballs go (default ROOT/bin/images)")
	address := flag.String("address", "", "containerd socket to import the images into (namespace k8s.io); empty: build only")
	version := flag.String("version", "dev", "Landform version stamped into its binaries")
	specFile := flag.String("spec", "", "the list of images (default ROOT/hack/images/images.yaml); e2e/cluster/bench-peer.sh passes its own for a peer's images")
	flag.Parse()

	b := &builder{root: *root, version: *version, built: map[string]string{}}
	if *out == "" {
		*out = filepath.Join(*root, "bin", "images")
	}
	b.out = *out
	if err := os.MkdirAll(filepath.Join(b.out, "files"), 0o755); err != nil {
		return err
	}
	if *specFile == "" {
		*specFile = filepath.Join(*root, "hack", "images", "images.yaml")
	}
	spec, err := Load(*specFile)
	if err != nil {
		return err
	}
	names := flag.Args()
	if len(names) == 0 {
		for _, img := range spec.Images {
			names = append(names, img.Name)
		}
	}
	for _, n := range names {
		img, ok := spec.image(n)
		if !ok {
			return fmt.Errorf("no image %q in %s", n, *specFile)
		}
		start := time.Now()
		file, err := b.build(spec, img)
		if err != nil {
			return fmt.Errorf("image %s: %w", n, err)
		}
		logf("built %s (%s) in %s", img.Ref, file, time.Since(start).Round(time.Second))
		if *address != "" {
			cmd := exec.Command("ctr", "--address", *address, "-n", "k8s.io", "images", "import", file)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("importing %s: %v: %s", file, err, out)
			}
			logf("imported %s into containerd (%s)", img.Ref, *address)
		}
	}
	return nil
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...) }

// Load reads and checks images.yaml.
func Load(file string) (*Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	seen := map[string]bool{}
	for _, img := range s.Images {
		if img.Name == "" || img.Ref == "" || seen[img.Name] {
			return nil, fmt.Errorf("%s: image %q: a unique name and a ref are required", file, img.Name)
		}
		if img.From != "" && !seen[img.From] {
			return nil, fmt.Errorf("%s: image %s is from %q, which is not an earlier image", file, img.Name, img.From)
		}
		seen[img.Name] = true
		if _, err := name.NewTag(img.Ref); err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", file, img.Name, err)
		}
		if img.Base != "" {
			base, ok := s.Bases[img.Base]
			if !ok {
				return nil, fmt.Errorf("%s: image %s: no base %q", file, img.Name, img.Base)
			}
			for _, p := range img.Packages {
				if _, ok := base.Packages[p]; !ok {
					return nil, fmt.Errorf("%s: image %s: base %s does not say how it provides package %s", file, img.Name, img.Base, p)
				}
			}
		}
	}
	return &s, nil
}

func (s *Spec) image(n string) (Image, bool) {
	for _, img := range s.Images {
		if img.Name == n {
			return img, true
		}
	}
	return Image{}, false
}

// Flatten returns the image with what it inherits from its From image:
// base, packages, copies, user, env, ports and entrypoint.
func (s *Spec) Flatten(img Image) Image {
	if img.From == "" {
		return img
	}
	parent, _ := s.image(img.From)
	p := s.Flatten(parent)
	out := p
	out.Name, out.Ref, out.Target, out.From = img.Name, img.Ref, img.Target, ""
	out.Copies = append(append([]Copy{}, p.Copies...), img.Copies...)
	out.Packages = append(append([]string{}, p.Packages...), img.Packages...)
	out.Env = map[string]string{}
	for k, v := range p.Env {
		out.Env[k] = v
	}
	for k, v := range img.Env {
		out.Env[k] = v
	}
	out.Expose = append(append([]int{}, p.Expose...), img.Expose...)
	if img.User != "" {
		out.User = img.User
	}
	if img.Entrypoint != nil {
		out.Entrypoint = img.Entrypoint
	}
	return out
}

type builder struct {
	root, out, version string
	built              map[string]string // source key -> local file or dir
}

// entry is one path of the image's filesystem.
type entry struct {
	mode     int64
	uid      int
	data     []byte
	file     string // content from this file (or nothing)
	linkname string // a symlink
	dir      bool
}

func (b *builder) build(spec *Spec, img Image) (string, error) {
	img = spec.Flatten(img)
	fsys := map[string]*entry{}
	env := map[string]string{}
	if img.Base != "" {
		base := spec.Bases[img.Base]
		for _, d := range base.Dirs {
			mode := int64(0o755)
			if d == "/tmp" {
				mode = 0o1777
			}
			uid := 0
			if strings.HasPrefix(d, "/home/nonroot") {
				uid = 65532
			}
			fsys[d] = &entry{dir: true, mode: mode, uid: uid}
		}
		if err := b.addFiles(fsys, base.Files); err != nil {
			return "", err
		}
		for _, p := range img.Packages {
			pkg := base.Packages[p]
			if pkg.Missing != "" {
				logf("image %s: package %s left out: %s", img.Name, p, pkg.Missing)
			}
			if err := b.addFiles(fsys, pkg.Files); err != nil {
				return "", err
			}
		}
		if base.Busybox != "" {
			if err := b.busyboxLinks(fsys, base.Busybox); err != nil {
				return "", err
			}
		}
		for k, v := range base.Env {
			env[k] = v
		}
	}
	for _, c := range img.Copies {
		if err := b.addFiles(fsys, c.Files); err != nil {
			return "", err
		}
	}
	for k, v := range img.Env {
		env[k] = v
	}

	layer, err := layerOf(fsys)
	if err != nil {
		return "", err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
	if err != nil {
		return "", err
	}
	image, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return "", err
	}
	cfg, err := image.ConfigFile()
	if err != nil {
		return "", err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = img.Entrypoint
	cfg.Config.User = img.User
	cfg.Config.WorkingDir = "/"
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg.Config.Env = append(cfg.Config.Env, k+"="+env[k])
	}
	if len(img.Expose) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Expose {
			cfg.Config.ExposedPorts[strconv.Itoa(p)+"/tcp"] = struct{}{}
		}
	}
	image, err = mutate.ConfigFile(image, cfg)
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(img.Ref)
	if err != nil {
		return "", err
	}
	file := filepath.Join(b.out, img.Name+".tar")
	if err := tarball.WriteToFile(file+".tmp", tag, image); err != nil {
		return "", err
	}
	return file, os.Rename(file+".tmp", file)
}

func (b *builder) addFiles(fsys map[string]*entry, files map[string]Source) error {
	for dst, src := range files {
		if err := b.add(fsys, dst, src); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
	}
	return nil
}

func (b *builder) add(fsys map[string]*entry, dst string, src Source) error {
	switch {
	case src.Text != "":
		fsys[dst] = &entry{mode: 0o644, data: []byte(src.Text)}
		return nil
	case src.Go != "":
		f, err := b.goBuild(src.Go)
		if err != nil {
			return err
		}
		fsys[dst] = &entry{mode: 0o755, file: f}
		return nil
	case src.Bin != "":
		return b.addStatic(fsys, dst, filepath.Join(b.root, "bin", src.Bin), "bin/"+src.Bin+" (hack/tools.sh)")
	case src.Host != "":
		return b.addStatic(fsys, dst, src.Host, src.Host)
	case src.Mirror != "":
		dir, err := b.mirror(src.Mirror)
		if err != nil {
			return err
		}
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			target := path.Join(dst, filepath.ToSlash(rel))
			if d.IsDir() {
				fsys[target] = &entry{dir: true, mode: 0o755}
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			fsys[target] = &entry{mode: int64(info.Mode().Perm()), file: p}
			return nil
		})
	}
	return errors.New("no source given")
}

// addStatic adds a file that must be a regular file, or a static
// executable when it is an ELF binary: the images carry no C library.
func (b *builder) addStatic(fsys map[string]*entry, dst, file, what string) error {
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return err
	}
	if f, err := elf.Open(real); err == nil {
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("%s is dynamically linked; the image has no C library", what)
			}
		}
	}
	fsys[dst] = &entry{mode: int64(info.Mode().Perm()), file: real}
	return nil
}

func (b *builder) goBuild(pkg string) (string, error) {
	if f, ok := b.built["go:"+pkg]; ok {
		return f, nil
	}
	out := filepath.Join(b.out, "files", path.Base(pkg))
	logf("building %s (CGO_ENABLED=0)", pkg)
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/landform-dev/landform/internal/version.Version="+b.version,
		"-o", out, ".")
	// The package's directory: a package of another module (hack/images)
	// builds in that module.
	cmd.Dir = filepath.Join(b.root, filepath.FromSlash(pkg))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	b.built["go:"+pkg] = out
	return out, nil
}

func (b *builder) mirror(script string) (string, error) {
	if d, ok := b.built["mirror:"+script]; ok {
		return d, nil
	}
	dir := filepath.Join(b.out, "files", "providers")
	cmd := exec.Command(filepath.Join(b.root, filepath.FromSlash(script)), dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	b.built["mirror:"+script] = dir
	return dir, nil
}

// busyboxLinks links every applet of the busybox binary at bb to it, as
// Alpine does, where no other file is.
func (b *builder) busyboxLinks(fsys map[string]*entry, bb string) error {
	e, ok := fsys[bb]
	if !ok {
		return fmt.Errorf("busybox %s is not among the base's files", bb)
	}
	out, err := exec.Command(e.file, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", e.file, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		p := "/" + strings.TrimPrefix(applet, "/")
		if _, ok := fsys[p]; !ok && p != bb {
			fsys[p] = &entry{linkname: bb}
		}
	}
	return nil
}

// layerOf writes the filesystem as one tar layer: parents before children,
// root-owned unless said otherwise, timestamps zero, so that the same
// content gives the same digest.
func layerOf(fsys map[string]*entry) ([]byte, error) {
	// Parent directories.
	for p := range fsys {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if _, ok := fsys[d]; !ok {
				fsys[d] = &entry{dir: true, mode: 0o755}
			}
		}
	}
	paths := slices.Sorted(maps.Keys(fsys))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		e := fsys[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.linkname != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.linkname, 0o777
		default:
			h.Typeflag = tar.TypeReg
			if e.file != "" {
				data, err := os.ReadFile(e.file)
				if err != nil {
					return nil, err
				}
				e.data = data
			}
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
