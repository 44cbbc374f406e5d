package server

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// ImportsFile holds the spec's import blocks, in the module dir, while a
// plan runs: a destroy plans no imports, and an apply takes the
// configuration from its plan file.
const ImportsFile = "landform_imports.tf"

// importToPattern is the CRD's pattern for Import.To
// (api/v1alpha1/terraform_types.go). The runner checks it again: `to` is
// written into HCL as it is, so anything else could add configuration.
var importToPattern = regexp.MustCompile(`^(module\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?\.)*[a-zA-Z_][a-zA-Z0-9_-]*\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?$`)

// Bounds of the CRD, checked again.
const (
	maxImports     = 100
	maxImportTo    = 512
	maxImportIDLen = 1024
)

// checkImports refuses imports the CRD would not admit, and more: a `to`
// with a control character (an instance key over two lines, which the
// pattern lets through), an id that is not UTF-8, and a `to` named twice.
// Only addresses appear in the errors: an id may come from a Secret.
func checkImports(imports []*runnerpb.Import) error {
	if len(imports) > maxImports {
		return invalidImports(fmt.Sprintf("%d imports, at most %d are allowed", len(imports), maxImports))
	}
	seen := map[string]bool{}
	for i, im := range imports {
		to := im.GetTo()
		switch {
		case len(to) > maxImportTo || !importToPattern.MatchString(to) || strings.ContainsFunc(to, unicode.IsControl):
			return invalidImports(fmt.Sprintf("import %d: %q is not a resource address (e.g. aws_db_instance.main, module.db.aws_db_instance.this[\"a\"])", i, to))
		case seen[to]:
			return invalidImports(fmt.Sprintf("import %d: %s is imported twice", i, to))
		case im.GetId() == "":
			return invalidImports(fmt.Sprintf("import %d (%s): the id is empty", i, to))
		case len(im.GetId()) > maxImportIDLen:
			return invalidImports(fmt.Sprintf("import %d (%s): the id has %d bytes, at most %d are allowed", i, to, len(im.GetId()), maxImportIDLen))
		case !utf8.ValidString(im.GetId()):
			return invalidImports(fmt.Sprintf("import %d (%s): the id is not UTF-8", i, to))
		}
		seen[to] = true
	}
	return nil
}

func invalidImports(msg string) error {
	return newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration, "spec imports: "+msg, nil)
}

// renderImports writes checked imports as import blocks; nil for none.
func renderImports(imports []*runnerpb.Import) []byte {
	if len(imports) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# Written by the Landform runner from spec.imports.\n")
	for _, im := range imports {
		fmt.Fprintf(&b, "\nimport {\n  to = %s\n  id = %s\n}\n", im.GetTo(), hclString(im.GetId()))
	}
	return []byte(b.String())
}

// hclString is s as an HCL quoted string literal that evaluates to s
// exactly: quotes, backslashes and control characters escaped, and the
// template introducers ${ and %{ doubled, so that nothing in s is
// interpolated or ends the literal. It follows hclwrite's own escaping
// (escapeQuotedStringLit in hashicorp/hcl/v2/hclwrite), which is not
// imported for these few lines: the main module does not otherwise need
// hcl/v2 and go-cty. The real engines read it back in
// TestImportHostileID.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '$', '%':
			b.WriteRune(r)
			if strings.HasPrefix(s[i+1:], "{") {
				b.WriteRune(r)
			}
		default:
			switch {
			case unicode.IsPrint(r):
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// placeImports writes the import blocks into the module for a plan, and
// removes them for anything else.
func (ws *workspace) placeImports(plan bool) error {
	if ws.importsPath == "" {
		return nil
	}
	if plan {
		if err := writePrivate(ws.importsPath, ws.imports); err != nil {
			return internalError("write the import blocks", err)
		}
		return nil
	}
	if err := os.Remove(ws.importsPath); err != nil && !os.IsNotExist(err) {
		return internalError("remove the import blocks", err)
	}
	return nil
}
