package server

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// writeCLIConfig writes the runner's own CLI configuration (CLIConfig).
func writeCLIConfig(path string, mirrors []string) error {
	cfg, err := CLIConfig(mirrors)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write CLI configuration: %w", err)
	}
	return nil
}

// CLIConfig is the CLI configuration a runner uses with these read-only
// provider mirrors: every provider a mirror holds comes only from that
// mirror (the engine would otherwise also ask its registry, which fails
// offline), the rest from their registries into the workspace only. There
// is deliberately no shared writable plugin cache: concurrent runners
// writing one cache corrupt it.
func CLIConfig(mirrors []string) (string, error) {
	var b strings.Builder
	b.WriteString("disable_checkpoint = true\n\nprovider_installation {\n")
	var mirrored []string
	for _, m := range mirrors {
		if strings.ContainsAny(m, "\"\\\n$%") {
			return "", fmt.Errorf("provider mirror path %q: unsupported characters", m)
		}
		held := MirroredProviders(m)
		mirrored = append(mirrored, held...)
		fmt.Fprintf(&b, "  filesystem_mirror {\n    path = %s\n", strconv.Quote(m))
		if len(held) > 0 {
			fmt.Fprintf(&b, "    include = %s\n", hclList(held))
		}
		b.WriteString("  }\n")
	}
	if len(mirrored) > 0 {
		fmt.Fprintf(&b, "  direct {\n    exclude = %s\n  }\n}\n", hclList(mirrored))
	} else {
		b.WriteString("  direct {}\n}\n")
	}
	return b.String(), nil
}

// MirroredProviders lists the providers a filesystem mirror holds, as
// "hostname/namespace/type", from its directory layout.
func MirroredProviders(mirror string) []string {
	var out []string
	hosts, _ := os.ReadDir(mirror)
	for _, h := range hosts {
		namespaces, _ := os.ReadDir(filepath.Join(mirror, h.Name()))
		for _, ns := range namespaces {
			types, _ := os.ReadDir(filepath.Join(mirror, h.Name(), ns.Name()))
			for _, t := range types {
				if h.IsDir() && ns.IsDir() && t.IsDir() {
					out = append(out, h.Name()+"/"+ns.Name()+"/"+t.Name())
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func hclList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// inheritedEnvDrop lists variables of the runner's own environment that
// terraform must not see besides the engine-managed ones (engineManaged): the
// machine's CLI configuration is replaced by ours, and a shared data dir or
// plugin cache would break concurrent runners.
var inheritedEnvDrop = map[string]bool{
	"TF_CLI_CONFIG_FILE":  true,
	"TERRAFORM_CONFIG":    true,
	"TF_PLUGIN_CACHE_DIR": true,
	"TF_DATA_DIR":         true,
}

// specEnvRefused lists variables a workspace spec may not set because they
// would escape the runner's isolation.
var specEnvRefused = map[string]bool{
	"HOME":                true,
	"TF_CLI_CONFIG_FILE":  true,
	"TERRAFORM_CONFIG":    true,
	"TF_PLUGIN_CACHE_DIR": true,
	"TF_DATA_DIR":         true,
}

// checkSpecEnv refuses variables that the runner manages itself
// (engineManaged) or that break isolation. Only names appear in the error,
// never values.
func checkSpecEnv(env map[string]string) error {
	var bad []string
	for k := range env {
		if specEnvRefused[k] || engineManaged(k) || k == "" || strings.Contains(k, "=") {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration,
		fmt.Sprintf("environment variables not allowed in a workspace spec: %s (pass variables as vars, not TF_VAR_*)", strings.Join(bad, ", ")), nil)
}

// droppedInheritedEnv names the runner's own variables that environment
// leaves out.
func droppedInheritedEnv() []string {
	var names []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); droppedFromInherited(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

// droppedFromInherited reports whether environment leaves the runner's own
// variable name out.
func droppedFromInherited(name string) bool {
	return inheritedEnvDrop[name] || engineManaged(name)
}

// environment builds terraform's environment: the runner's own, cleaned,
// with HOME and the CLI configuration under the work dir, plus the spec's.
// terraform-exec takes it as it is (SetEnv, which refuses the
// engine-managed variables) and adds its own: TF_IN_AUTOMATION, TF_LOG*
// empty, its user agent, no TF_WORKSPACE.
func (s *Server) environment(extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !droppedFromInherited(k) {
			env[k] = v
		}
	}
	env["HOME"] = s.homeDir
	env["TF_CLI_CONFIG_FILE"] = s.cliConfig
	env["CHECKPOINT_DISABLE"] = "1"
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// managedEnvNames and managedEnvPrefixes are the variables that change how
// the engine runs a command (its arguments, input, logging, workspace,
// provider plugins) or set a module variable: the runner decides them, so
// neither the machine nor a workspace spec may.
var (
	managedEnvNames = map[string]bool{
		"TF_CLI_ARGS": true, "TF_INPUT": true, "TF_IN_AUTOMATION": true,
		"TF_LOG": true, "TF_LOG_CORE": true, "TF_LOG_PATH": true, "TF_LOG_PROVIDER": true,
		"TF_REATTACH_PROVIDERS": true, "TF_APPEND_USER_AGENT": true, "TF_WORKSPACE": true,
		"TF_DISABLE_PLUGIN_TLS": true, "TF_SKIP_PROVIDER_VERIFY": true,
	}
	managedEnvPrefixes = []string{"TF_VAR_", "TF_CLI_ARGS_"}
)

// engineManaged reports whether the runner manages the variable name.
func engineManaged(name string) bool {
	return managedEnvNames[name] || slices.ContainsFunc(managedEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
