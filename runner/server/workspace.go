package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/fluxcd/pkg/tar"
	"github.com/hashicorp/terraform-exec/tfexec"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

const (
	// VarsFile holds the workspace's variable values, in the module dir.
	VarsFile = "landform.auto.tfvars.json"
	// BackendOverrideFile configures the backend, in the module dir. An
	// override file replaces any backend block of the module.
	BackendOverrideFile = "landform_backend_override.tf"
)

const defaultBackend = "terraform {\n  backend \"kubernetes\" {}\n}\n"

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// workspace is the uploaded module, ready for terraform. It belongs to
// whoever holds the server's op slot.
type workspace struct {
	digest    string
	root      string // extracted tarball
	moduleDir string

	workspace     string
	backendConfig map[string]string
	// stateBackend replaces backendConfig for terraform when the state is
	// reached through the state proxy (stateaccess.go).
	stateBackend  map[string]string
	customBackend string
	env           map[string]string
	// imports are the import blocks a plan writes at importsPath (in
	// the module dir); importsPath is empty when the spec has none.
	imports     []byte
	importsPath string
	// secrets are values never to echo in an error: the spec's env.
	secrets []string
	// shippedStates are the errored.tfstate files the tarball held,
	// removed when it was extracted (removeShippedStates); every run
	// says so.
	shippedStates []string

	// configKey identifies everything init depends on; a new key means
	// init again.
	configKey   string
	initialised bool
	// engine runs ws's commands through tf (useEngine); both are unset
	// until the first run or call that needs the engine.
	engine *engine
	tf     *tfexec.Terraform
}

// UploadWorkspace receives the spec and the tarball, verifies its digest,
// extracts it and renders vars and backend.
func (s *Server) UploadWorkspace(stream runnerpb.Runner_UploadWorkspaceServer) (err error) {
	ctx, end, err := s.begin(stream.Context(), "UploadWorkspace")
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()

	first, err := stream.Recv()
	if err != nil {
		return err
	}
	spec := first.GetSpec()
	if spec == nil {
		return status.Error(codes.InvalidArgument, "the first message must carry the workspace spec")
	}
	if err := validateSpec(spec); err != nil {
		return err
	}

	root := ""
	var shipped []string
	if s.ws != nil && s.ws.digest == spec.TarballDigest {
		// Same content: skip the transfer. Returning now ends the
		// stream; the client stops sending.
		root, shipped = s.ws.root, s.ws.shippedStates
	} else {
		if root, shipped, err = s.receiveTarball(stream, spec); err != nil {
			return err
		}
	}
	ws, err := s.prepareWorkspace(root, spec)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if s.ws == nil || root != s.ws.root {
			os.RemoveAll(root)
		}
		return err
	}
	if s.ws != nil && s.ws.root != root {
		// The old tree is replaced only once the new one is ready, so a
		// failed upload leaves the previous workspace usable.
		os.RemoveAll(s.ws.root)
	}
	if s.ws != nil && s.ws.configKey == ws.configKey {
		// Only the vars changed: init and the engine handle still hold.
		ws.initialised, ws.engine, ws.tf = s.ws.initialised, s.ws.engine, s.ws.tf
	}
	ws.shippedStates = shipped
	s.ws = ws
	return stream.SendAndClose(&runnerpb.UploadWorkspaceResponse{TarballDigest: spec.TarballDigest})
}

func validateSpec(spec *runnerpb.WorkspaceSpec) error {
	if !digestPattern.MatchString(spec.TarballDigest) {
		return newError(codes.InvalidArgument, runner.ReasonDigestMismatch,
			fmt.Sprintf("tarball digest %q is not of the form sha256:<64 hex digits>", spec.TarballDigest), nil)
	}
	if err := checkModulePath(spec.Path); err != nil {
		return err
	}
	if len(spec.VarsJson) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(spec.VarsJson, &obj); err != nil {
			// The JSON error may quote a value: keep it out.
			return newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration, "vars_json is not a JSON object", nil)
		}
	}
	if err := checkImports(spec.Imports); err != nil {
		return err
	}
	return checkSpecEnv(spec.Env)
}

// checkModulePath refuses absolute paths and paths that leave the tarball,
// before anything is received. securejoin would silently clamp them into
// the tarball instead, which would plan the wrong module.
func checkModulePath(p string) error {
	slash := filepath.ToSlash(p)
	clean := path.Clean(slash)
	if path.IsAbs(slash) || clean == ".." || strings.HasPrefix(clean, "../") {
		return newError(codes.InvalidArgument, runner.ReasonInvalidPath, fmt.Sprintf("module path %q escapes the tarball", p), nil)
	}
	return nil
}

// receiveTarball streams the tarball to a temp file while hashing it,
// verifies the digest and extracts it into a new directory, without the
// errored.tfstate files it holds (removeShippedStates), which it returns.
func (s *Server) receiveTarball(stream runnerpb.Runner_UploadWorkspaceServer, spec *runnerpb.WorkspaceSpec) (string, []string, error) {
	tmp, err := os.CreateTemp(s.tmpDir, "tarball-*.tar.gz")
	if err != nil {
		return "", nil, internalError("create tarball file", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	h := sha256.New()
	size, err := copyChunks(io.MultiWriter(tmp, h), stream)
	if err != nil {
		return "", nil, err
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != spec.TarballDigest {
		return "", nil, newError(codes.InvalidArgument, runner.ReasonDigestMismatch,
			fmt.Sprintf("tarball digest is %s, the spec says %s", got, spec.TarballDigest),
			map[string]string{"expected": spec.TarballDigest, "actual": got})
	}
	if spec.TarballSize > 0 && size != spec.TarballSize {
		return "", nil, newError(codes.InvalidArgument, runner.ReasonDigestMismatch,
			fmt.Sprintf("tarball has %d bytes, the spec says %d", size, spec.TarballSize), nil)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", nil, internalError("read tarball", err)
	}
	root, err := os.MkdirTemp(s.workDir, "src-")
	if err != nil {
		return "", nil, internalError("create source dir", err)
	}
	// No size cap: the digest is verified, and modules with vendored
	// providers or assets are legitimately large.
	if err := tar.Untar(tmp, root, tar.WithMaxUntarSize(-1)); err != nil {
		os.RemoveAll(root)
		return "", nil, newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration, "extract tarball: "+err.Error(), nil)
	}
	shipped, err := removeShippedStates(root)
	if err != nil {
		os.RemoveAll(root)
		return "", nil, internalError("remove the tarball's "+erroredStateFile, err)
	}
	for _, f := range shipped {
		s.log.Info("removed an errored.tfstate shipped in the tarball", "file", f)
	}
	return root, shipped, nil
}

// removeShippedStates removes every errored.tfstate in root, a tarball
// just extracted, and returns their paths in it. saveErroredState takes
// that file, after every apply and destroy, for the state the engine could
// not write: one committed with the module (a person's failed local apply)
// would end every run STATE_UNSAVED, or replace the state the apply wrote.
// No engine ran in this tree yet, so none is a state to save; one the
// engine writes later is moved to runner.KeptStateFile as its run ends.
// The whole tree: another upload of this tarball may name another module.
func removeShippedStates(root string) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root || d.Name() != erroredStateFile {
			return err
		}
		// Whatever it is: a directory would fail every read of the
		// file, a symlink would read another file.
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		removed = append(removed, filepath.ToSlash(rel))
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	return removed, err
}

// copyChunks writes the chunks of an upload stream to w until the client
// closes its side.
func copyChunks(w io.Writer, stream runnerpb.Runner_UploadWorkspaceServer) (int64, error) {
	var n int64
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		chunk := msg.GetChunk()
		if msg.GetSpec() != nil {
			return n, status.Error(codes.InvalidArgument, "only the first message may carry a spec")
		}
		if _, err := w.Write(chunk); err != nil {
			return n, internalError("write tarball", err)
		}
		n += int64(len(chunk))
	}
}

// prepareWorkspace resolves the module dir in root and renders the files the
// spec asks for.
func (s *Server) prepareWorkspace(root string, spec *runnerpb.WorkspaceSpec) (*workspace, error) {
	moduleDir, err := securejoin.SecureJoin(root, spec.Path)
	if err != nil {
		return nil, newError(codes.InvalidArgument, runner.ReasonInvalidPath, fmt.Sprintf("module path %q: %v", spec.Path, err), nil)
	}
	if fi, err := os.Stat(moduleDir); err != nil || !fi.IsDir() {
		return nil, newError(codes.InvalidArgument, runner.ReasonInvalidPath, fmt.Sprintf("module path %q is not a directory in the tarball", spec.Path), nil)
	}

	varsPath := filepath.Join(moduleDir, VarsFile)
	if len(spec.VarsJson) > 0 {
		// Written with its mode forced: the tarball may already hold a
		// file of that name with looser permissions.
		if err := writePrivate(varsPath, spec.VarsJson); err != nil {
			return nil, internalError("write vars", err)
		}
	} else if err := os.Remove(varsPath); err != nil && !os.IsNotExist(err) {
		return nil, internalError("remove vars", err)
	}

	if s.ws != nil && s.ws.root == root && s.ws.importsPath != "" {
		// The same tree: the previous spec's import blocks must not
		// stay for this spec's module, or for another spec of theirs.
		if err := os.Remove(s.ws.importsPath); err != nil && !os.IsNotExist(err) {
			return nil, internalError("remove the import blocks", err)
		}
	}
	importsPath := filepath.Join(moduleDir, ImportsFile)
	if len(spec.Imports) == 0 {
		importsPath = ""
	} else if _, err := os.Lstat(importsPath); err == nil {
		return nil, newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration,
			fmt.Sprintf("the module has a file %s, where the runner writes spec.imports' import blocks: rename it", path.Join(spec.Path, ImportsFile)), nil)
	}

	backend := spec.CustomBackend
	if backend == "" {
		backend = defaultBackend
	}
	if err := writePrivate(filepath.Join(moduleDir, BackendOverrideFile), []byte(backend)); err != nil {
		return nil, internalError("write backend", err)
	}

	ws := &workspace{
		digest:        spec.TarballDigest,
		root:          root,
		moduleDir:     moduleDir,
		workspace:     spec.Workspace,
		backendConfig: spec.BackendConfig,
		customBackend: spec.CustomBackend,
		env:           s.environment(spec.Env),
		configKey:     configKey(moduleDir, backend, spec),
		imports:       renderImports(spec.Imports),
		importsPath:   importsPath,
	}
	for _, v := range spec.Env {
		if len(v) >= 3 {
			ws.secrets = append(ws.secrets, v)
		}
	}
	// Longest first, so that a secret containing another is replaced whole.
	sort.Slice(ws.secrets, func(i, j int) bool { return len(ws.secrets[i]) > len(ws.secrets[j]) })
	return ws, nil
}

func writePrivate(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// configKey hashes everything init depends on.
func configKey(moduleDir, backend string, spec *runnerpb.WorkspaceSpec) string {
	h := sha256.New()
	field := func(h hash.Hash, s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(h, spec.TarballDigest)
	field(h, moduleDir)
	field(h, backend)
	field(h, spec.Workspace)
	for _, m := range []map[string]string{spec.BackendConfig, spec.Env} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		field(h, fmt.Sprint(len(keys)))
		for _, k := range keys {
			field(h, k)
			field(h, m[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
