package testenv

import (
	"encoding/json"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// EnvOr is the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// JSONValue wraps a Go value as a Terraform variable's value. It panics on
// a value encoding/json cannot encode: a test's own mistake.
func JSONValue(v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}
