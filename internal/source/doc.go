// Package source finds the artifact a Flux source publishes, downloads it
// once per digest, verifies the digest before anything is extracted, and
// resolves a module path inside it without letting the path escape.
package source

import "errors"

// Errors callers map to conditions. They are always wrapped with which
// source or path is concerned and what to do about it; test with errors.Is.
var (
	// ErrSourceNotFound: the source object does not exist.
	ErrSourceNotFound = errors.New("source not found")
	// ErrKindNotServed: the API server does not serve the source's kind.
	ErrKindNotServed = errors.New("source kind not served")
	// ErrSourceNotReady: the source has not published an artifact yet.
	ErrSourceNotReady = errors.New("source not ready")
	// ErrDigestMismatch: the downloaded bytes are not the advertised artifact.
	ErrDigestMismatch = errors.New("artifact digest mismatch")
	// ErrArtifactTooLarge: the artifact is over a bound of SizeLimits. The
	// bytes of a digest never change: retrying cannot help, another
	// revision or a larger bound can.
	ErrArtifactTooLarge = errors.New("artifact too large")
	// ErrInvalidPath: spec.path escapes the artifact or is not a directory in it.
	ErrInvalidPath = errors.New("invalid module path")
)
