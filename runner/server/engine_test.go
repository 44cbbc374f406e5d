package server

import (
	"slices"
	"testing"
)

func TestParseWorkspaces(t *testing.T) {
	names, current := parseWorkspaces("  default\n* staging\n  prod\n\n")
	if !slices.Equal(names, []string{"default", "staging", "prod"}) || current != "staging" {
		t.Fatalf("got %v, current %q", names, current)
	}
	if names, current := parseWorkspaces("* default\n"); !slices.Equal(names, []string{"default"}) || current != "default" {
		t.Fatalf("got %v, current %q", names, current)
	}
}
