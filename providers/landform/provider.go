package main

import (
	"context"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// resources lists the constructors of every resource this provider offers.
// Each resource lives in its own file (resource_<name>.go); add new ones here.
var resources = []func() resource.Resource{
	NewFileResource,
}

// New returns a constructor for the landform provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &landformProvider{version: version}
	}
}

type landformProvider struct {
	version string
}

var _ provider.Provider = (*landformProvider)(nil)

type providerModel struct {
	Root types.String `tfsdk:"root"`
}

// providerData is handed to every resource's Configure.
type providerData struct {
	// root, when not empty, is prepended to relative paths.
	root string
}

// resolve turns a path as written in the configuration into the path used
// on disk.
func (d *providerData) resolve(p string) string {
	if d == nil || d.root == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(d.root, p)
}

func (p *landformProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "landform"
	resp.Version = p.version
}

func (p *landformProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Offline provider for Landform's tests and examples. It manages local files only.",
		Attributes: map[string]schema.Attribute{
			"root": schema.StringAttribute{
				Optional:    true,
				Description: "Directory prepended to relative paths. Relative paths without it are relative to the working directory of the engine.",
			},
		},
	}
}

func (p *landformProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Root.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("root"), "Unknown root",
			"The landform provider's root must be known when planning: do not derive it from values that are only known after apply.")
		return
	}
	data := &providerData{root: cfg.Root.ValueString()}
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *landformProvider) Resources(context.Context) []func() resource.Resource {
	return resources
}

func (p *landformProvider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}
