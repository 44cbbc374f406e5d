package tfstate

import "testing"

func TestSeed(t *testing.T) {
	seed := Empty("lin-1")
	if !IsSeed(seed, "lin-1") {
		t.Error("Empty(lin-1) is not taken for its seed")
	}
	if IsSeed(seed, "lin-2") || IsSeed(seed, "") {
		t.Error("a seed is taken for another lineage's")
	}
	written := Compress([]byte(`{"version":4,"serial":1,"lineage":"lin-1","outputs":{},"resources":[]}`))
	if IsSeed(written, "lin-1") {
		t.Error("a state the engine wrote over the seed (serial 1) is taken for the seed")
	}
	encrypted := Compress([]byte(`{"serial":0,"lineage":"lin-1","encrypted_data":"AAAA","encryption_version":"v0"}`))
	if IsSeed(encrypted, "lin-1") {
		t.Error("an encrypted state is taken for the seed")
	}
}

func TestHoldsResources(t *testing.T) {
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{
		{"no state", nil, false},
		{"the seed", Empty("lin-1"), false},
		{"outputs only", Compress([]byte(`{"version":4,"serial":3,"lineage":"l","outputs":{"a":{"value":"x","type":"string"}},"resources":[]}`)), false},
		{"a resource", Compress([]byte(`{"version":4,"serial":3,"lineage":"l","resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[]}]}`)), true},
		{"encrypted", Compress([]byte(`{"serial":3,"lineage":"l","encrypted_data":"AAAA"}`)), true},
		{"not gzip'd", []byte("garbage"), true},
	} {
		if got := HoldsResources(tt.data); got != tt.want {
			t.Errorf("%s: HoldsResources = %v, want %v", tt.name, got, tt.want)
		}
	}
}
