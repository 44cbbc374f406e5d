package owned

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 60) + "-" + strings.Repeat("b", 100)
	longer := long + "x"
	tests := []struct {
		name string
		want string // empty: only check validity and length
	}{
		{"db", "db"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{long, ""},
		{longer, ""},
		{strings.Repeat("a", 53) + "." + strings.Repeat("c", 20), ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := LabelValue(tt.name)
		if tt.want != "" && got != tt.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q is not a valid label value: %v", tt.name, got, errs)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q map to the same label value %q", prev, tt.name, got)
		}
		seen[got] = tt.name
	}
}
