package source

import (
	"fmt"
	"math"
	"strings"

	"github.com/fluxcd/pkg/tar"
)

// SizeLimits bound one artifact. The cache is shared by every object on
// the controller, whoever owns it, and a gzip'd tarball can expand a
// thousandfold: without a bound, one tenant's source (an OCIRepository
// that copies its layer as it is, an ExternalArtifact) fills the
// controller's disk and stops every tenant's runs.
type SizeLimits struct {
	// Download is the most bytes of an artifact's tarball as served: a
	// larger Content-Length fails before the body is read, and a body that
	// goes past it fails there. DefaultMaxDownloadSize when zero; no bound
	// when negative.
	Download int64
	// Extracted is the most bytes of the files in an artifact's tarball,
	// summed as their tar headers declare them and checked before each file
	// is written (fluxcd/pkg/tar's WithMaxUntarSize).
	// DefaultMaxExtractedSize when zero; no bound when negative.
	Extracted int64
}

// The default bounds are generous on purpose: a Terraform module's
// artifact is usually kilobytes, and the room is for a source that vendors
// providers (tens of MiB zipped, several hundred MiB unpacked for the
// largest) or a monorepo. With both, one artifact's tarball and tree
// still fit in the default --artifact-cache-max-size (2 GiB).
const (
	// DefaultMaxDownloadSize is SizeLimits.Download when none is set: 256 MiB.
	DefaultMaxDownloadSize int64 = 256 << 20
	// DefaultMaxExtractedSize is SizeLimits.Extracted when none is set: 1 GiB.
	DefaultMaxExtractedSize int64 = 1 << 30
)

// download and extracted are the bounds in force; negative: none.
func (l SizeLimits) download() int64  { return bound(l.Download, DefaultMaxDownloadSize) }
func (l SizeLimits) extracted() int64 { return bound(l.Extracted, DefaultMaxExtractedSize) }

func bound(n, def int64) int64 {
	switch {
	case n == 0:
		return def
	case n < 0:
		return -1
	}
	return n
}

// untarLimit is the extracted bound as fluxcd/pkg/tar takes it.
func (l SizeLimits) untarLimit() int {
	n := l.extracted()
	if n < 0 {
		return tar.UnlimitedUntarSize
	}
	return int(min(n, int64(math.MaxInt)))
}

// tooLargeHint says what to do about an artifact over a bound: its
// digest's bytes never shrink, so only another revision or a larger bound
// helps.
const tooLargeHint = "publish a smaller artifact (leave files out with the source's ignore rules) or raise the bound"

func downloadTooLarge(what string, limit int64) error {
	return fmt.Errorf("%w: %s more than %s, the bound of --artifact-download-max-size; %s",
		ErrArtifactTooLarge, what, sizeString(limit), tooLargeHint)
}

// extractTooLarge recognises fluxcd/pkg/tar's refusal of an archive over
// WithMaxUntarSize, which has no error of its own to test with errors.Is,
// and says which bound it is. TestFetchExtractedSizeBound fails if a new
// version of fluxcd/pkg/tar words it differently.
func extractTooLarge(err error, limit int64) error {
	if err == nil || limit < 0 || !strings.Contains(err.Error(), "bigger than max archive size") {
		return err
	}
	return fmt.Errorf("%w: its files add up to more than %s, the bound of --artifact-extracted-max-size; %s",
		ErrArtifactTooLarge, sizeString(limit), tooLargeHint)
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
