package planview

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixture reads testdata/name.json, made by testdata/make-fixtures.sh.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRead(t *testing.T) {
	d, err := Read(fixture(t, "plan"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.Symbol()+" "+c.Address+c.Note())
	}
	// The plan's order, by address; an import that changes nothing is
	// listed too.
	want := []string{
		"<- terraform_data.adopted (import)",
		"+ terraform_data.cache",
		"-/+ terraform_data.database (replace)",
		"~ terraform_data.imported (import)",
		"+ terraform_data.many",
		"~ terraform_data.network",
		"- terraform_data.old",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"terraform_data.adopted", "terraform_data.imported"}, d.Imports()); diff != "" {
		t.Errorf("imports (-want +got):\n%s", diff)
	}
	if d.Engine != "1.12.6" {
		t.Errorf("engine %q, want 1.12.6", d.Engine)
	}
	if diff := cmp.Diff(map[string]bool{"dsn": true, "network_id": false, "cache_id": false}, d.Sensitive); diff != "" {
		t.Errorf("output sensitivity (-want +got):\n%s", diff)
	}
	var destructive []string
	for _, c := range d.Changes {
		if c.Destructive() {
			destructive = append(destructive, c.Address)
		}
	}
	if diff := cmp.Diff([]string{"terraform_data.database", "terraform_data.old"}, destructive); diff != "" {
		t.Errorf("destructive (-want +got):\n%s", diff)
	}
}

func TestChangeSymbolNote(t *testing.T) {
	for _, tt := range []struct {
		change Change
		want   string
	}{
		{Change{Actions: actions("create", "delete")}, "+/- (replace)"},
		{Change{Actions: actions("read")}, "<="},
		{Change{Actions: actions("forget")}, ". (forget: removed from the state, kept in the cloud)"},
		{Change{Actions: actions("delete"), Deposed: true}, "- (deposed object)"},
		{Change{Actions: actions("no-op"), Import: true}, "<- (import)"},
	} {
		if got := tt.change.Symbol() + tt.change.Note(); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.change.Actions, got, tt.want)
		}
	}
}

func TestReadNotJSON(t *testing.T) {
	if _, err := Read([]byte("Plan: 1 to add")); err == nil {
		t.Error("Read of a human plan: no error")
	}
}
