// Package engines installs the Terraform or OpenTofu version a run asks for,
// verified, and resolves a version constraint to the version a source
// offers.
//
// Terraform comes through hc-install (releases.ExactVersion: its checksum
// and signature checks, against HashiCorp's releases API or a mirror of it),
// OpenTofu through OpenTofu's own download library, tofudl (against
// get.opentofu.org or a tofudl mirror), or either from a binary already on
// the filesystem (Installer.Local: the runner image's own engine, a version
// baked into a custom image). What a download installs is cached in
// Installer.Dir, one directory per engine and version, with the binary's
// digest; the runners of one machine share that directory.
//
// Two errors say what went wrong in terms a controller can report:
// *VerificationError (a checksum or signature did not verify: the
// controller's EngineVerificationFailed, and nothing runs) and
// *UnavailableError (the source cannot be reached or does not offer the
// version: the message says which version, from where, and how to provide
// it). Any other error is a bad Spec or a local failure.
package engines

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/hashicorp/go-version"
	"github.com/opentofu/tofudl"
	"github.com/opentofu/tofudl/branding"
)

// The engines, as Spec.Name spells them.
const (
	OpenTofu  = "opentofu"
	Terraform = "terraform"
)

// officialTerraformURL is hc-install's default releases API, named here for
// messages (hc-install keeps its own constant internal).
const officialTerraformURL = "https://releases.hashicorp.com"

// Spec names one exact engine version and where to get it. It mirrors the
// runner protocol's EngineSpec (runner/proto/runner.proto).
type Spec struct {
	// Name is "opentofu" or "terraform".
	Name string
	// Version is an exact version, e.g. "1.5.7" (Resolver resolves
	// constraints).
	Version string
	// ReleasesURL is the base URL to download from. For terraform, a
	// releases API like releases.hashicorp.com's (hc-install's ApiBaseURL:
	// <url>/terraform/index.json, <url>/terraform/<v>/...); for opentofu, a
	// mirror in the layout tofudl.Mirror serves (<url>/api.json,
	// <url>/v<v>/<artifact>). Empty: the engine's official one.
	ReleasesURL string
	// SigningKey is the ASCII-armored OpenPGP public key the SHA256SUMS
	// signature must verify with, for a mirror that re-signs releases.
	// Empty: the engine's official release key.
	SigningKey string
}

// spec is a checked Spec: a known engine, an exact version without a "v",
// a releases URL without a trailing slash.
type spec struct {
	Spec
	version *version.Version
}

// check refuses a Spec before anything is downloaded for it.
func check(s Spec) (spec, error) {
	if s.Name != OpenTofu && s.Name != Terraform {
		return spec{}, fmt.Errorf("unknown engine %q: want %q or %q", s.Name, OpenTofu, Terraform)
	}
	v, err := exact(s.Name, s.Version)
	if err != nil {
		return spec{}, err
	}
	s.Version = v.Original()
	if s.ReleasesURL, err = checkReleasesURL(s.ReleasesURL); err != nil {
		return spec{}, err
	}
	if s.SigningKey != "" {
		keys, err := openpgp.ReadArmoredKeyRing(strings.NewReader(s.SigningKey))
		if err == nil && len(keys) == 0 {
			err = errors.New("no key in it")
		}
		if err != nil {
			return spec{}, fmt.Errorf("the %s signing key is not an armored OpenPGP public key: %w", s.Name, err)
		}
	}
	return spec{Spec: s, version: v}, nil
}

// exactVersion is a version with all three numbers; "1.5" is a constraint
// (go-version reads it as "= 1.5.0"), not a version to install.
var exactVersion = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// exact parses an exact version of engine, without a leading "v".
func exact(engine, s string) (*version.Version, error) {
	if !exactVersion.MatchString(s) {
		return nil, fmt.Errorf("%s version %q is not an exact version", engine, s)
	}
	s = strings.TrimPrefix(s, "v")
	if engine == OpenTofu {
		// tofudl knows only OpenTofu's own spelling of prereleases.
		if err := tofudl.Version(s).Validate(); err != nil {
			return nil, fmt.Errorf("%s version %q is not an OpenTofu version (e.g. 1.9.0 or 1.10.0-rc1)", engine, s)
		}
	}
	return version.NewVersion(s)
}

func checkReleasesURL(raw string) (string, error) {
	raw = strings.TrimRight(raw, "/")
	if raw == "" {
		return "", nil
	}
	// The messages do not repeat the URL: one that does not parse may
	// hold a password where url.Redacted would not find it.
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("the releases URL is not an http(s) URL")
	}
	if strings.Contains(raw, "{{") {
		// tofudl reads its download URL as a Go template.
		return "", errors.New("the releases URL may not contain {{")
	}
	return raw, nil
}

// redact drops a password from a checked releases URL, for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// binaryName is the engine's executable.
func binaryName(engine string) string {
	if engine == OpenTofu {
		return branding.BinaryName
	}
	return "terraform"
}

// source is where a download of s comes from, for messages.
func (s spec) source() string {
	switch {
	case s.Name == OpenTofu && s.ReleasesURL == "":
		return branding.DefaultDownloadAPIURL
	case s.Name == OpenTofu:
		return redact(s.ReleasesURL + "/api.json")
	case s.ReleasesURL == "":
		return officialTerraformURL
	}
	return redact(s.ReleasesURL)
}

// key names the key a signature is checked with, for messages.
func (s spec) key() string {
	switch {
	case s.SigningKey != "":
		return "the configured signing key"
	case s.Name == OpenTofu:
		return "OpenTofu's release key"
	}
	return "HashiCorp's release key"
}

// scrub masks the releases URL's password, if it has one, in err's message:
// hc-install quotes the URLs it requested in its errors.
func (s spec) scrub(err error) error {
	u, perr := url.Parse(s.ReleasesURL)
	if perr != nil || u.User == nil {
		return err
	}
	if p, ok := u.User.Password(); ok && p != "" && strings.Contains(err.Error(), p) {
		return &scrubbed{err: err, msg: strings.ReplaceAll(err.Error(), p, "xxxxx")}
	}
	return err
}

type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
