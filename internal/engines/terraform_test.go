package engines

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hc-install loses the error of a write that fails while it unpacks, so
// what it unpacked is checked against the archive.
func TestUnpackedRefusesWhatDiffersFromTheArchive(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "a.zip")
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	f, err := z.Create("terraform")
	if err != nil {
		t.Fatal(err)
	}
	binary := []byte("#!/bin/sh\necho Terraform v1.5.7\n")
	if _, err := f.Write(binary); err != nil || z.Close() != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(binary)
	flipped[3] ^= 1
	for _, tc := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"intact", binary, ""},
		{"truncated", binary[:10], "10 bytes"},
		{"changed", flipped, "CRC-32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "terraform")
			if err := os.WriteFile(bin, tc.content, 0o700); err != nil {
				t.Fatal(err)
			}
			err := unpacked(archive, bin)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("unpacked = %v, want %q", err, tc.want)
			}
		})
	}
}
