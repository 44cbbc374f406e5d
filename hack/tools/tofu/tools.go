//go:build tools

// Package tools pins OpenTofu so that hack/tools.sh can build it offline from the module proxy.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
