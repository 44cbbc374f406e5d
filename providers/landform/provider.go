package main

import (
	"context"
	"fmt"
	"os"
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
	NewSecurityGroupResource,
	NewDatabaseResource,
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
	Root     types.String `tfsdk:"root"`
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
}

// Environment variables that configure the cloud API when the provider
// block does not.
const (
	envEndpoint = "LANDFORM_CLOUD_ENDPOINT"
	envToken    = "LANDFORM_CLOUD_TOKEN"
)

// providerData is handed to every resource's Configure.
type providerData struct {
	// root, when not empty, is prepended to relative paths.
	root string
	// cloud is nil when no endpoint is configured: landform_file needs none.
	cloud *cloudClient
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
		Description: "Offline provider for Landform's tests and examples: local files, and databases and security groups " +
			"in Landform's stand-in cloud (`landform dev`, or cmd/landform-cloud).",
		Attributes: map[string]schema.Attribute{
			"root": schema.StringAttribute{
				Optional:    true,
				Description: "Directory prepended to relative paths. Relative paths without it are relative to the working directory of the engine.",
			},
			"endpoint": schema.StringAttribute{
				Optional: true,
				Description: "Base URL of the stand-in cloud's API, e.g. http://127.0.0.1:8480. Default: $" + envEndpoint +
					". Needed only by landform_database and landform_security_group.",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Bearer token for the cloud API, if it wants one. Default: $" + envToken + ".",
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
	for _, a := range []struct {
		name  string
		value types.String
	}{{"root", cfg.Root}, {"endpoint", cfg.Endpoint}, {"token", cfg.Token}} {
		if a.value.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(a.name), "Unknown "+a.name,
				"The landform provider's "+a.name+" must be known when planning: do not derive it from values that are only known after apply.")
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	data := &providerData{root: cfg.Root.ValueString()}
	endpoint, token := cfg.Endpoint.ValueString(), cfg.Token.ValueString()
	if endpoint == "" {
		endpoint = os.Getenv(envEndpoint)
	}
	if cfg.Token.IsNull() {
		token = os.Getenv(envToken)
	}
	if endpoint != "" {
		c, err := newCloudClient(endpoint, token)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid endpoint", err.Error())
			return
		}
		data.cloud = c
	}
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *landformProvider) Resources(context.Context) []func() resource.Resource {
	return resources
}

func (p *landformProvider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}

// cloudFrom returns the cloud client in the provider data a resource's
// Configure receives; nil data (validation, before the provider is
// configured) is not an error.
func cloudFrom(req resource.ConfigureRequest, resp *resource.ConfigureResponse) *cloudClient {
	if req.ProviderData == nil {
		return nil
	}
	data, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("expected *providerData, got %T", req.ProviderData))
		return nil
	}
	if data.cloud == nil {
		resp.Diagnostics.AddError("No cloud endpoint",
			"landform_database and landform_security_group live in Landform's stand-in cloud: set endpoint in the "+
				"landform provider block or $"+envEndpoint+" to its URL (`landform dev` prints it).")
	}
	return data.cloud
}
