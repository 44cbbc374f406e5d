package enginemirror_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

// A small stand-in binary: the engines' own tests serve the real ones.
func fakeBinary(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "engine")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho fake\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return b
}

// release fetches a version's SHA256SUMS, its signature and its archive.
func release(t *testing.T, m *enginemirror.Mirror, engine, v string) (sums, sig, archive []byte) {
	t.Helper()
	archive = get(t, m.TerraformURL()+enginemirror.ArchivePath(engine, v))
	if engine == enginemirror.OpenTofu {
		base := m.OpenTofuURL() + "/v" + v + "/tofu_" + v + "_SHA256SUMS"
		return get(t, base), get(t, base+".gpgsig"), archive
	}
	var index struct {
		SHASUMS    string `json:"shasums"`
		SHASUMSSig string `json:"shasums_signature"`
		Builds     []struct{ URL string }
	}
	if err := json.Unmarshal(get(t, m.TerraformURL()+"/terraform/"+v+"/index.json"), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Builds) != 1 || !strings.HasSuffix(index.Builds[0].URL, enginemirror.ArchivePath(engine, v)) {
		t.Errorf("builds %+v, want one at %s", index.Builds, enginemirror.ArchivePath(engine, v))
	}
	base := m.TerraformURL() + "/terraform/" + v + "/"
	return get(t, base+index.SHASUMS), get(t, base+index.SHASUMSSig), archive
}

func TestMirrorSignsAndTampers(t *testing.T) {
	bin := fakeBinary(t)
	for _, tc := range []struct {
		name          string
		opts          []enginemirror.Option
		signed, match bool
	}{
		{"as released", nil, true, true},
		{"tampered", []enginemirror.Option{enginemirror.Tampered(enginemirror.Terraform, "1.0.0"), enginemirror.Tampered(enginemirror.OpenTofu, "1.0.0")}, true, false},
		{"another key", []enginemirror.Option{enginemirror.SignedByAnotherKey()}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := enginemirror.New(t, append(tc.opts,
				enginemirror.WithTerraform(bin, "1.0.0", "0.9.0"),
				enginemirror.WithOpenTofu(bin, "1.0.0", "0.9.0"))...)
			keys, err := openpgp.ReadArmoredKeyRing(strings.NewReader(m.SigningKey()))
			if err != nil {
				t.Fatal(err)
			}
			for _, engine := range []string{enginemirror.Terraform, enginemirror.OpenTofu} {
				sums, sig, archive := release(t, m, engine, "1.0.0")
				_, err := openpgp.CheckDetachedSignature(keys, bytes.NewReader(sums), bytes.NewReader(sig), nil)
				if (err == nil) != tc.signed {
					t.Errorf("%s: signature check: %v, want it to pass: %t", engine, err, tc.signed)
				}
				sum := sha256.Sum256(archive)
				listed := strings.HasPrefix(string(sums), hex.EncodeToString(sum[:])+"  ")
				if listed != tc.match {
					t.Errorf("%s: archive's sha256 listed in %q: %t, want %t", engine, sums, listed, tc.match)
				}
			}
			// The extra version serves the very same archive, unless
			// the other one was tampered with.
			_, _, extra := release(t, m, enginemirror.Terraform, "0.9.0")
			_, _, archive := release(t, m, enginemirror.Terraform, "1.0.0")
			if differs, tampered := !bytes.Equal(extra, archive), !tc.match; differs != tampered {
				t.Errorf("extra version's archive differs: %t, want %t", differs, tampered)
			}
			if n := m.Requests(enginemirror.ArchivePath(enginemirror.Terraform, "1.0.0")); n != 2 {
				t.Errorf("counted %d requests of the archive, want 2", n)
			}
		})
	}
}

func TestMirrorListsVersions(t *testing.T) {
	bin := fakeBinary(t)
	m := enginemirror.New(t, enginemirror.WithTerraform(bin, "1.0.0", "0.9.0"), enginemirror.WithOpenTofu(bin, "1.0.0"))
	var tf struct{ Versions map[string]any }
	if err := json.Unmarshal(get(t, m.TerraformURL()+"/terraform/index.json"), &tf); err != nil || len(tf.Versions) != 2 {
		t.Errorf("terraform index: %v, %v; want 2 versions", tf.Versions, err)
	}
	var tofu struct {
		Versions []struct {
			ID    string
			Files []string
		}
	}
	if err := json.Unmarshal(get(t, m.OpenTofuURL()+"/api.json"), &tofu); err != nil || len(tofu.Versions) != 1 || len(tofu.Versions[0].Files) != 3 {
		t.Errorf("api.json: %+v, %v; want 1.0.0 with 3 files", tofu, err)
	}
	if total := m.TotalRequests(); total != 2 {
		t.Errorf("TotalRequests = %d, want 2", total)
	}
}
