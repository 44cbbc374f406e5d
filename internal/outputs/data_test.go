package outputs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecretData(t *testing.T) {
	outs := []Output{
		{Name: "endpoint", Value: json.RawMessage(`"db.example.com:5432"`)},
		{Name: "password", Value: json.RawMessage(`"p@ss \"word\"\n"`), Sensitive: true},
		{Name: "port", Value: json.RawMessage(`5432`)},
		{Name: "ratio", Value: json.RawMessage(`0.25`)},
		{Name: "enabled", Value: json.RawMessage(`true`)},
		{Name: "tags", Value: json.RawMessage(`{ "team" : "db",
			"env": "prod" }`)},
		{Name: "zones", Value: json.RawMessage(`[ "a", "b" ]`)},
		{Name: "nothing", Value: json.RawMessage(`null`)},
	}
	all := map[string]string{
		"endpoint": "db.example.com:5432",
		"password": "p@ss \"word\"\n",
		"port":     "5432",
		"ratio":    "0.25",
		"enabled":  "true",
		"tags":     `{"team":"db","env":"prod"}`,
		"zones":    `["a","b"]`,
		"nothing":  "null",
	}
	tests := []struct {
		name      string
		outs      []Output
		selection []string
		want      map[string]string
		wantErr   []string
	}{
		{name: "all when empty", outs: outs, want: all},
		{name: "selected", outs: outs, selection: []string{"port", "tags"},
			want: map[string]string{"port": "5432", "tags": `{"team":"db","env":"prod"}`}},
		{name: "alias", outs: outs, selection: []string{"endpoint:DB_HOST", "password:DB_PASSWORD", "enabled"},
			want: map[string]string{"DB_HOST": "db.example.com:5432", "DB_PASSWORD": "p@ss \"word\"\n", "enabled": "true"}},
		{name: "empty alias means the name", outs: outs, selection: []string{"port:"}, want: map[string]string{"port": "5432"}},
		{name: "no outputs", outs: nil, want: map[string]string{}},
		{name: "missing", outs: outs, selection: []string{"port", "url"},
			wantErr: []string{`"url"`, "available: enabled, endpoint, nothing, password, port, ratio, tags, zones"}},
		{name: "missing with no outputs", outs: nil, selection: []string{"url"}, wantErr: []string{`"url"`, "available: none"}},
		{name: "invalid key", outs: outs, selection: []string{"port:db/port"}, wantErr: []string{`"db/port"`}},
		{name: "two outputs one key", outs: outs, selection: []string{"port:x", "ratio:x"}, wantErr: []string{`"port"`, `"ratio"`, `key "x"`}},
		{name: "invalid JSON does not leak", outs: []Output{{Name: "bad", Value: json.RawMessage(`{"k": s3cr3tv4lue}`)}},
			wantErr: []string{`output "bad"`, "offset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SecretData(tt.outs, tt.selection)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				for _, o := range tt.outs {
					if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "'s'") || (o.Sensitive && strings.Contains(err.Error(), string(o.Value))) {
						t.Errorf("error leaks a value: %q", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotStr := map[string]string{}
			for k, v := range got {
				gotStr[k] = string(v)
			}
			if d := cmp.Diff(tt.want, gotStr); d != "" {
				t.Errorf("data (-want +got):\n%s", d)
			}
		})
	}
}

func TestNames(t *testing.T) {
	got := Names([]Output{{Name: "b"}, {Name: "a"}, {Name: "c"}})
	if d := cmp.Diff([]string{"a", "b", "c"}, got); d != "" {
		t.Error(d)
	}
	if got := Names(nil); got == nil || len(got) != 0 {
		t.Errorf("Names(nil) = %#v, want an empty slice", got)
	}
}
