package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// landform_file manages one local file. Read compares the file on disk with
// the state, so a file edited or deleted out of band shows up as drift in
// the next plan (an update or a create) and the next apply repairs it.

var (
	_ resource.Resource                   = (*fileResource)(nil)
	_ resource.ResourceWithConfigure      = (*fileResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*fileResource)(nil)
	_ resource.ResourceWithImportState    = (*fileResource)(nil)
	_ resource.ResourceWithValidateConfig = (*fileResource)(nil)
)

// NewFileResource returns the landform_file resource.
func NewFileResource() resource.Resource { return &fileResource{} }

type fileResource struct {
	provider *providerData
}

type fileModel struct {
	ID               types.String `tfsdk:"id"`
	Path             types.String `tfsdk:"path"`
	Content          types.String `tfsdk:"content"`
	SensitiveContent types.String `tfsdk:"sensitive_content"`
	SHA256           types.String `tfsdk:"sha256"`
}

// fileMode is the permission every file written by landform_file gets.
const fileMode fs.FileMode = 0o644

func (r *fileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_file"
}

func (r *fileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A local file (mode 0644; parent directories are created). " +
			"Out-of-band edits and deletions show up as drift in the next plan and are repaired by apply.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:    true,
				Description: "Same as path.",
			},
			"path": schema.StringAttribute{
				Required: true,
				Description: "Path of the file. Relative paths are taken relative to the provider's root if set, " +
					"otherwise to the engine's working directory. Changing it replaces the resource.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"content": schema.StringAttribute{
				Required:    true,
				Description: "Content of the file.",
			},
			"sensitive_content": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "Sensitive text appended after content. If the file is changed so that it no longer " +
					"ends with this text, the whole file as read is reported in sensitive_content (and content " +
					"becomes empty) so that a plan never shows the secret unredacted.",
			},
			"sha256": schema.StringAttribute{
				Computed:    true,
				Description: "Hex SHA-256 of the file's content (content followed by sensitive_content).",
			},
		},
	}
}

func (r *fileResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil { // not configured yet (e.g. validation)
		return
	}
	data, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("expected *providerData, got %T", req.ProviderData))
		return
	}
	r.provider = data
}

func (r *fileResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg fileModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !cfg.Path.IsNull() && !cfg.Path.IsUnknown() && cfg.Path.ValueString() == "" {
		resp.Diagnostics.AddAttributeError(path.Root("path"), "Empty path", "path must not be empty.")
	}
}

// ModifyPlan fills in id and sha256 from the configuration so that a plan
// shows their final values whenever path and the contents are known.
func (r *fileResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() { // destroy
		return
	}
	var plan fileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Path.IsUnknown() {
		plan.ID = types.StringUnknown()
	} else {
		plan.ID = plan.Path
	}
	if plan.Content.IsUnknown() || plan.SensitiveContent.IsUnknown() {
		plan.SHA256 = types.StringUnknown()
	} else {
		plan.SHA256 = types.StringValue(sum(plan.fullContent()))
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *fileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.writePlanned(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *fileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := r.provider.resolve(state.Path.ValueString())
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		// Gone: forget it, so that the plan creates it again.
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("path"), "Cannot read file", err.Error())
		return
	}
	disk := string(data)
	if disk != state.fullContent() {
		// Changed out of band: record what is there, so that the plan shows
		// an update back to the configured content.
		secret := state.SensitiveContent.ValueString()
		switch {
		case secret == "":
			state.Content = types.StringValue(disk)
		case strings.HasSuffix(disk, secret):
			state.Content = types.StringValue(strings.TrimSuffix(disk, secret))
		default:
			// The sensitive part itself changed; the file may still hold
			// pieces of it, so report all of it as sensitive.
			state.Content = types.StringValue("")
			state.SensitiveContent = types.StringValue(disk)
		}
	}
	state.ID = state.Path
	state.SHA256 = types.StringValue(sum(disk))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *fileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.writePlanned(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

// writePlanned writes the planned file and records it as the new state:
// create and update do the same.
func (r *fileResource) writePlanned(ctx context.Context, planned tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var plan fileModel
	diags.Append(planned.Get(ctx, &plan)...)
	if diags.HasError() {
		return
	}
	r.write(&plan, diags)
	if diags.HasError() {
		return
	}
	diags.Append(state.Set(ctx, &plan)...)
}

func (r *fileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := os.Remove(r.provider.resolve(state.Path.ValueString()))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		resp.Diagnostics.AddAttributeError(path.Root("path"), "Cannot delete file", err.Error())
	}
}

// ImportState takes the file's path as the import ID; content is read from
// disk by the Read that follows.
func (r *fileResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("path"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("content"), "")...)
}

// write puts m's content on disk and fills in its computed attributes.
func (r *fileResource) write(m *fileModel, diags *diag.Diagnostics) {
	data := m.fullContent()
	if err := writeFile(r.provider.resolve(m.Path.ValueString()), []byte(data)); err != nil {
		diags.AddAttributeError(path.Root("path"), "Cannot write file", err.Error())
		return
	}
	m.ID = m.Path
	m.SHA256 = types.StringValue(sum(data))
}

// fullContent is what the file holds: content followed by sensitive_content.
func (m *fileModel) fullContent() string {
	return m.Content.ValueString() + m.SensitiveContent.ValueString()
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// writeFile replaces name with data atomically (temporary file and rename in
// the same directory), creating parent directories as needed.
func writeFile(name string, data []byte) (err error) {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(fileMode); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
