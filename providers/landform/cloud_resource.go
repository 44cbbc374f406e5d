package main

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// What the cloud resources (landform_security_group, landform_database)
// share: reading a plan or state, and reading and deleting their object.

// decode reads a plan or a state into a new T; ok is false when the
// diagnostics hold an error.
func decode[T any](ctx context.Context, from interface {
	Get(context.Context, any) diag.Diagnostics
}, diags *diag.Diagnostics) (m T, ok bool) {
	diags.Append(from.Get(ctx, &m)...)
	return m, !diags.HasError()
}

// read gets the object at path into out. An object gone is dropped from
// the state, so that the plan creates it again; either that or an error
// returns false.
func (c *cloudClient) read(ctx context.Context, path, what string, out any, resp *resource.ReadResponse) bool {
	err := c.do(ctx, http.MethodGet, path, nil, out)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return false
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read "+what, err.Error())
		return false
	}
	return true
}

// remove deletes the object at path; one already gone is no error.
func (c *cloudClient) remove(ctx context.Context, path, what string, diags *diag.Diagnostics) {
	if err := c.do(ctx, http.MethodDelete, path, nil, nil); err != nil && !isNotFound(err) {
		diags.AddError("Cannot delete "+what, err.Error())
	}
}
