package planstore

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestChunkNames(t *testing.T) {
	tests := []struct {
		owner string
		i     int
		want  string // empty: only check validity
	}{
		{"db", 0, "tfplan-db-0"},
		{"db", 12, "tfplan-db-12"},
		{strings.Repeat("a", 253), 999999, ""},
		{strings.Repeat("a", 239) + "." + strings.Repeat("b", 13), 3, ""},
	}
	for _, tt := range tests {
		got := layout.ChunkName(tt.owner, tt.i)
		if tt.want != "" && got != tt.want {
			t.Errorf("layout.ChunkName(%q, %d) = %q, want %q", tt.owner, tt.i, got, tt.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("layout.ChunkName(%.20q..., %d) = %q is not a valid Secret name: %v", tt.owner, tt.i, got, errs)
		}
		if i, ok := layout.ChunkIndex(tt.owner, got); !ok || i != tt.i {
			t.Errorf("layout.ChunkIndex(%q) = %d, %v, want %d", got, i, ok, tt.i)
		}
	}
	for _, name := range []string{"tfplan-db-1-0", "tfplan-db-", "tfplan-db-01", "tfplan-db-x", "tfplan-dbx-0", "other-db-0"} {
		if i, ok := layout.ChunkIndex("db", name); ok {
			t.Errorf("layout.ChunkIndex(db, %q) = %d, true; want no match", name, i)
		}
	}
}
