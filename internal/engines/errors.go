package engines

import (
	"fmt"
	"strings"
)

// VerificationError is a release whose checksum or signature did not
// verify. Nothing from it was installed, and retrying the same source gives
// the same answer: the controller reports it as EngineVerificationFailed.
type VerificationError struct {
	// Engine and Version name the release.
	Engine, Version string
	// URL is where it came from.
	URL string
	// Reason says what did not verify.
	Reason string
	// Err is the downloading library's own error.
	Err error
}

func (e *VerificationError) Error() string {
	msg := fmt.Sprintf("%s %s from %s failed verification: %s; nothing was installed", e.Engine, e.Version, e.URL, e.Reason)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

func (e *VerificationError) Unwrap() error { return e.Err }

// UnavailableError is a version that could not be had: its source cannot
// be reached, does not offer it, or took too long or sent too much. The
// message names the engine, the version and the URL tried, and how to
// provide the version.
type UnavailableError struct {
	// Engine names the engine.
	Engine string
	// Version is the version Install wanted, or the constraint Resolve
	// could not resolve.
	Version string
	// URL is the URL tried.
	URL string
	// Reason says why it failed there.
	Reason string
	// Searched are the local binaries Install looked at (Installer.Local).
	Searched []string
	// Err is the underlying error, if any.
	Err error
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("%s %s is not available from %s: %s", e.Engine, e.Version, e.URL, e.Reason)
	if !exactVersion.MatchString(e.Version) {
		return msg + "; to resolve it, set the engine's releases URL to a reachable mirror that lists a matching version, or name an exact version"
	}
	where := "at a path the runner searches"
	if len(e.Searched) > 0 {
		where += " (" + strings.Join(e.Searched, ", ") + ")"
	}
	return fmt.Sprintf("%s; to provide it, set the engine's releases URL to a reachable mirror that offers it, or put the %s binary of version %s in the runner image %s",
		msg, binaryName(e.Engine), e.Version, where)
}

func (e *UnavailableError) Unwrap() error { return e.Err }
