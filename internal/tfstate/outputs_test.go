package tfstate

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func TestDecodeOutputs(t *testing.T) {
	outs, err := DecodeOutputs(gz(t, `{"version":4,"serial":3,"outputs":{
		"b":{"value":{"x":1},"type":["object",{"x":"number"}]},
		"a":{"value":"s3cr3t","type":"string","sensitive":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[0].Name != "a" || outs[1].Name != "b" {
		t.Fatalf("outputs %v, want a and b in order", outs)
	}
	if string(outs[0].ValueJson) != `"s3cr3t"` || !outs[0].Sensitive || string(outs[0].TypeJson) != `"string"` {
		t.Fatalf("output a = %v", outs[0])
	}
	if string(outs[1].ValueJson) != `{"x":1}` || outs[1].Sensitive {
		t.Fatalf("output b = %v", outs[1])
	}
}

func TestDecodeOutputsRejectsGarbageWithoutQuotingIt(t *testing.T) {
	if _, err := DecodeOutputs([]byte("plain")); err == nil {
		t.Fatal("a state that is not gzip'd was accepted")
	}
	_, err := DecodeOutputs(gz(t, `{"outputs": {"a": {"value": "hunter2"`))
	if err == nil {
		t.Fatal("truncated JSON was accepted")
	}
	if bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
		t.Fatalf("error quotes the state: %v", err)
	}
}

// An encrypted state (OpenTofu's state encryption) has no readable
// outputs: it must not pass for a state without any.
func TestEncryptedStateIsNotPlain(t *testing.T) {
	for _, st := range []string{
		`{"serial":2,"lineage":"l","meta":{"key_provider.pbkdf2.k":"e30="},"encrypted_data":"AAAA","encryption_version":"v0"}`,
		`{"version":5,"outputs":{}}`,
	} {
		if _, err := DecodeOutputs(gz(t, st)); !errors.Is(err, ErrNotPlain) {
			t.Errorf("%s: error %v, want ErrNotPlain", st, err)
		}
	}
}

func TestEmptyStateHasNoOutputs(t *testing.T) {
	outs, err := DecodeOutputs(nil)
	if err != nil || len(outs) != 0 {
		t.Fatalf("empty state: %v, %v", outs, err)
	}
}
