//go:build tools

// Package tools pins Terraform 1.5.7 (the last MPL release).
package tools

import _ "github.com/hashicorp/terraform"
