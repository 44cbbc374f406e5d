package engines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/opentofu/tofudl"
)

// tofuDownloader is tofudl for s's source. A releases URL is the base of a
// tofudl mirror (tofudl.Mirror serves this layout): api.json lists the
// versions, v<version>/<artifact> serves each file. The HTTP client is
// always ours: tofudl's default one changes http.DefaultTransport's TLS
// settings for the whole process.
func tofuDownloader(s spec, w *watch) (tofudl.Downloader, error) {
	opts := []tofudl.ConfigOpt{tofudl.ConfigHTTPClient(w.client())}
	if s.ReleasesURL != "" {
		opts = append(opts,
			tofudl.ConfigAPIURL(s.ReleasesURL+"/api.json"),
			tofudl.ConfigDownloadMirrorURLTemplate(s.ReleasesURL+"/v{{ .Version }}/{{ .Artifact }}"))
	}
	if s.SigningKey != "" {
		opts = append(opts, tofudl.ConfigGPGKey(s.SigningKey))
	}
	dl, err := tofudl.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("opentofu downloader: %w", err)
	}
	return dl, nil
}

// downloadOpenTofu installs s into dir with tofudl, which checks the
// SHA256SUMS signature and the archive's checksum before unpacking it, and
// returns the binary. tofudl hands the binary over in memory (its archive
// too, while it verifies it): some 150 MB for a moment, once per version
// and machine.
func (i *Installer) downloadOpenTofu(ctx context.Context, s spec, dir string, w *watch) (string, error) {
	dl, err := tofuDownloader(s, w)
	if err != nil {
		return "", err
	}
	b, err := dl.Download(ctx, tofudl.DownloadOptVersion(tofudl.Version(s.Version)))
	if err != nil {
		return "", i.refusal(s, w, err, openTofuVerification(s), openTofuMissing)
	}
	bin := filepath.Join(dir, binaryName(OpenTofu))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		return "", err
	}
	return bin, nil
}

func openTofuVerification(s spec) func(error) (string, bool) {
	return func(err error) (string, bool) {
		var sig *tofudl.SignatureError
		var corrupt *tofudl.ArtifactCorruptedError
		switch {
		case errors.As(err, &sig) && sig.Cause == nil:
			return "its signed SHA256SUMS does not list its archive", true
		case errors.As(err, &sig):
			return "its SHA256SUMS signature does not verify with " + s.key() +
				" (for a mirror that re-signs releases, configure its public key as the engine's signing key)", true
		case errors.As(err, &corrupt):
			return "its archive does not match the checksum in its signed SHA256SUMS, or is corrupt", true
		}
		return "", false
	}
}

func openTofuMissing(err error) (string, bool) {
	var version *tofudl.NoSuchVersionError
	var platform *tofudl.UnsupportedPlatformOrArchitectureError
	switch {
	case errors.As(err, &version):
		return "its api.json does not list it", true
	case errors.As(err, &platform):
		return fmt.Sprintf("it has no build for %s/%s", runtime.GOOS, runtime.GOARCH), true
	}
	return "", false
}
