package engines

import (
	"fmt"
	"strings"
	"testing"
)

// A Spec is refused before any request when it cannot be installed as it
// is.
func TestCheckRefusesSpecs(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string // in the error; empty: accepted
	}{
		{Spec{Name: Terraform, Version: "1.5.7"}, ""},
		{Spec{Name: Terraform, Version: "v1.5.7", ReleasesURL: "https://mirror.example/hashicorp/"}, ""},
		{Spec{Name: OpenTofu, Version: "1.10.0-rc1"}, ""},
		{Spec{Name: "pulumi", Version: "1.5.7"}, `unknown engine "pulumi"`},
		{Spec{Name: Terraform, Version: "~> 1.5"}, "not an exact version"},
		{Spec{Name: Terraform, Version: "1.5"}, "not an exact version"},
		{Spec{Name: OpenTofu, Version: "1.10.0-beta.1"}, "not an OpenTofu version"},
		{Spec{Name: Terraform, Version: "1.5.7", ReleasesURL: "mirror.example"}, "not an http(s) URL"},
		{Spec{Name: OpenTofu, Version: "1.9.0", ReleasesURL: "https://mirror.example/{{ .Version }}"}, "may not contain {{"},
		{Spec{Name: Terraform, Version: "1.5.7", ReleasesURL: "https://user:secret@mirror.example\x7f"}, "not an http(s) URL"},
		{Spec{Name: Terraform, Version: "1.5.7", ReleasesURL: "user:secret@mirror.example"}, "not an http(s) URL"},
		{Spec{Name: Terraform, Version: "1.5.7", SigningKey: "not a key"}, "not an armored OpenPGP public key"},
	} {
		_, err := check(tc.spec)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("check(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("check(%+v) = %v: says the URL's password", tc.spec, err)
		}
	}
}

func TestScrubMasksTheReleasesURLPassword(t *testing.T) {
	s := spec{Spec: Spec{ReleasesURL: "https://landform:s3cret@mirror.example"}}
	err := s.scrub(fmt.Errorf("failed to obtain product version from %q: 500", s.ReleasesURL+"/terraform/1.5.7/index.json"))
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "landform:xxxxx@mirror.example") {
		t.Errorf("scrubbed: %v", err)
	}
}
