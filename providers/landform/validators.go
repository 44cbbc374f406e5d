package main

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// Validators that report bad configuration at plan time, naming the
// attribute, instead of as an API error during apply. They mirror the
// cloud API's own checks (which remain the authority). Written here rather
// than taken from terraform-plugin-framework-validators to keep this module's
// dependencies to the framework alone.

// nameValidator: the API's rule for database and security group names.
type nameValidator struct{}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

const nameRule = "1 to 63 lowercase letters, digits, '-' and '_', starting with a letter"

func (nameValidator) Description(context.Context) string         { return nameRule }
func (nameValidator) MarkdownDescription(context.Context) string { return nameRule }

func (nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if v := req.ConfigValue.ValueString(); !namePattern.MatchString(v) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid name", fmt.Sprintf("%q is not a valid name: use %s.", v, nameRule))
	}
}

// oneOf accepts the listed strings only.
type oneOf []string

func (v oneOf) Description(context.Context) string {
	return "one of " + strings.Join(v, ", ")
}

func (v oneOf) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v oneOf) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, ok := range v {
		if req.ConfigValue.ValueString() == ok {
			return
		}
	}
	resp.Diagnostics.AddAttributeError(req.Path, "Invalid value",
		fmt.Sprintf("%q is not supported: use %s.", req.ConfigValue.ValueString(), v.Description(ctx)))
}

// between accepts integers in [min, max].
type between struct{ min, max int64 }

func (v between) Description(context.Context) string {
	return fmt.Sprintf("between %d and %d", v.min, v.max)
}

func (v between) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v between) ValidateInt64(ctx context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); n < v.min || n > v.max {
		resp.Diagnostics.AddAttributeError(req.Path, "Value out of range", fmt.Sprintf("%d is not %s.", n, v.Description(ctx)))
	}
}

// cidrValidator accepts canonical CIDR ranges only: the API stores what it is
// sent, and "10.1.2.3/8" would mean a range other than it reads as.
type cidrValidator struct{}

func (cidrValidator) Description(context.Context) string {
	return "a CIDR range in canonical form, such as 10.0.0.0/8"
}

func (v cidrValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (cidrValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid CIDR", fmt.Sprintf("%q is not a CIDR range such as 10.0.0.0/8.", s))
	case p.Masked() != p:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid CIDR", fmt.Sprintf("%q has host bits set: use %s.", s, p.Masked()))
	}
}
