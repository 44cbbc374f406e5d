package engines

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
)

// downloadTerraform installs s into dir with hc-install, which checks the
// SHA256SUMS signature and the archive's checksum, and returns the binary.
//
// hc-install v0.10.0 loses every error of its Downloader.DownloadAndUnpack
// that follows the creation of its temporary zip file: a deferred
// os.Remove assigns to the named error result. A tampered archive made
// ExactVersion.Install fail with "chmod .../terraform: no such file or
// directory" rather than its checksum mismatch, and a write that fails
// while unpacking (a full disk) would leave a truncated binary reported as
// installed. So the archive's checksum is checked again, against the
// SHA256SUMS whose signature hc-install verified (watch keeps both), and
// the binary it unpacked against the archive's own entry (watch copies the
// archive to tee, next to the binary, removed before the directory is
// renamed into place).
func (i *Installer) downloadTerraform(ctx context.Context, s spec, dir string, w *watch) (string, error) {
	w.tee = filepath.Join(dir, ".archive.zip")
	defer os.Remove(w.tee)
	ev := &releases.ExactVersion{
		Product:          product.Terraform,
		Version:          s.version,
		InstallDir:       dir,
		Timeout:          i.timeout(),
		ApiBaseURL:       s.ReleasesURL,
		ArmoredPublicKey: s.SigningKey,
		HTTPClient:       w.client(),
	}
	bin, err := ev.Install(ctx)
	w.closeTee()
	if mismatch := w.archiveMismatch(); mismatch != nil {
		err = mismatch
	} else if err == nil {
		err = unpacked(w.tee, bin)
	}
	if err != nil {
		return "", i.refusal(s, w, err, terraformVerification(s), terraformMissing)
	}
	return bin, nil
}

// unpacked checks the binary at bin against its entry in the zip archive.
func unpacked(archive, bin string) error {
	z, err := zip.OpenReader(archive)
	if err != nil {
		return fmt.Errorf("reading the downloaded archive again: %w", err)
	}
	defer z.Close()
	i := slices.IndexFunc(z.File, func(f *zip.File) bool { return f.Name == filepath.Base(bin) })
	if i < 0 {
		return fmt.Errorf("the archive holds no %s", filepath.Base(bin))
	}
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	crc := crc32.NewIEEE()
	n, err := io.Copy(crc, f)
	if err != nil {
		return err
	}
	if want := z.File[i]; uint64(n) != want.UncompressedSize64 || crc.Sum32() != want.CRC32 {
		return fmt.Errorf("unpacking %s: %d bytes with CRC-32 %08x, the archive's entry has %d with %08x",
			filepath.Base(bin), n, crc.Sum32(), want.UncompressedSize64, want.CRC32)
	}
	return nil
}

// terraformVerification reads hc-install v0.10.0's verification failures.
// It formats them with fmt.Errorf (only the signature's wraps go-crypto's
// error), so they are known by their messages, those of its releasesjson
// Downloader and ChecksumDownloader; a checksum mismatch is also
// downloadTerraform's own finding. The tampered-archive and other-key
// tests fail if an upgrade changes them.
func terraformVerification(s spec) func(error) (string, bool) {
	return func(err error) (string, bool) {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "unable to verify checksums signature"):
			return "its SHA256SUMS signature does not verify with " + s.key() +
				" (for a mirror that re-signs releases, configure its public key as the engine's signing key)", true
		case errors.As(err, new(*checksumError)) || strings.Contains(msg, "checksum mismatch"):
			return "its archive does not match the checksum in its signed SHA256SUMS", true
		case strings.Contains(msg, "no checksum found for"):
			return "its signed SHA256SUMS does not list its archive", true
		case strings.Contains(msg, "no suitable sig file found"):
			return "it publishes no SHA256SUMS signature", true
		}
		return "", false
	}
}

// terraformMissing reads hc-install's answer for a version without a build
// for this platform.
func terraformMissing(err error) (string, bool) {
	msg := err.Error()
	if strings.Contains(msg, "no builds found for") || strings.Contains(msg, "no ZIP archive found for") {
		return fmt.Sprintf("it has no build for %s/%s", runtime.GOOS, runtime.GOARCH), true
	}
	return "", false
}
