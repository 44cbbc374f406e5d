package main

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// landform_security_group manages a security group in the stand-in cloud.
// Read takes what the API holds, so changes made out of band show up as an
// update and a deleted group as a create.

var (
	_ resource.Resource                = (*securityGroupResource)(nil)
	_ resource.ResourceWithConfigure   = (*securityGroupResource)(nil)
	_ resource.ResourceWithImportState = (*securityGroupResource)(nil)
)

// NewSecurityGroupResource returns the landform_security_group resource.
func NewSecurityGroupResource() resource.Resource { return &securityGroupResource{} }

type securityGroupResource struct {
	cloud *cloudClient
}

type securityGroupModel struct {
	ID          types.String   `tfsdk:"id"`
	Name        types.String   `tfsdk:"name"`
	Description types.String   `tfsdk:"description"`
	Ingress     []ingressModel `tfsdk:"ingress"`
}

type ingressModel struct {
	Protocol types.String `tfsdk:"protocol"`
	Port     types.Int64  `tfsdk:"port"`
	CIDR     types.String `tfsdk:"cidr"`
}

func (r *securityGroupResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_security_group"
}

func (r *securityGroupResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A security group in Landform's stand-in cloud: named ingress rules that databases attach. " +
			"Changes and deletions made out of band show up as drift in the next plan and are repaired by apply.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "Assigned by the cloud: sg-<hex>.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:    true,
				Description: "Unique among security groups; " + nameRule + ".",
				Validators:  []validator.String{nameValidator{}},
			},
			"description": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(""),
				Description: "Free text, at most 255 bytes.",
			},
		},
		Blocks: map[string]schema.Block{
			"ingress": schema.ListNestedBlock{
				Description: "Traffic let in; repeat the block for several rules (at most 50).",
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"protocol": schema.StringAttribute{
							Required:    true,
							Description: "tcp or udp.",
							Validators:  []validator.String{oneOf{"tcp", "udp"}},
						},
						"port": schema.Int64Attribute{
							Required:    true,
							Description: "Port, 1-65535.",
							Validators:  []validator.Int64{between{1, 65535}},
						},
						"cidr": schema.StringAttribute{
							Required:    true,
							Description: "Source range in canonical form, e.g. 10.0.0.0/8.",
							Validators:  []validator.String{cidrValidator{}},
						},
					},
				},
			},
		},
	}
}

func (r *securityGroupResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.cloud = cloudFrom(req, resp)
}

func (r *securityGroupResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.save(ctx, http.MethodPost, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *securityGroupResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[securityGroupModel](ctx, req.State, &resp.Diagnostics)
	var sg cloudSecurityGroup
	if !ok || !r.cloud.read(ctx, securityGroupPath(state.ID.ValueString()), "security group", &sg, resp) {
		return
	}
	state.fromAPI(sg)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *securityGroupResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// PUT: the configuration is the whole truth.
	r.save(ctx, http.MethodPut, req.Plan, &resp.State, &resp.Diagnostics)
}

// save sends the planned group (POST creates it, PUT replaces it) and
// records what the cloud answers as the state.
func (r *securityGroupResource) save(ctx context.Context, method string, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	m, ok := decode[securityGroupModel](ctx, plan, diags)
	if !ok {
		return
	}
	at, verb := "/v1/security-groups", "create"
	if method == http.MethodPut {
		at, verb = securityGroupPath(m.ID.ValueString()), "update"
	}
	var sg cloudSecurityGroup
	if err := r.cloud.do(ctx, method, at, m.toAPI(), &sg); err != nil {
		diags.AddError("Cannot "+verb+" security group", err.Error())
		return
	}
	m.fromAPI(sg)
	diags.Append(state.Set(ctx, &m)...)
}

func (r *securityGroupResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if state, ok := decode[securityGroupModel](ctx, req.State, &resp.Diagnostics); ok {
		r.cloud.remove(ctx, securityGroupPath(state.ID.ValueString()), "security group", &resp.Diagnostics)
	}
}

// ImportState takes the group's id (sg-<hex>); Read fills in the rest.
func (r *securityGroupResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

func (m *securityGroupModel) toAPI() cloudSecurityGroup {
	sg := cloudSecurityGroup{
		Name:        m.Name.ValueString(),
		Description: m.Description.ValueString(),
		Ingress:     make([]cloudIngressRule, 0, len(m.Ingress)),
	}
	for _, in := range m.Ingress {
		sg.Ingress = append(sg.Ingress, cloudIngressRule{
			Protocol: in.Protocol.ValueString(),
			Port:     in.Port.ValueInt64(),
			CIDR:     in.CIDR.ValueString(),
		})
	}
	return sg
}

func (m *securityGroupModel) fromAPI(sg cloudSecurityGroup) {
	m.ID = types.StringValue(sg.ID)
	m.Name = types.StringValue(sg.Name)
	m.Description = types.StringValue(sg.Description)
	// Never nil: no blocks is an empty list, and a nil slice would be null.
	m.Ingress = make([]ingressModel, 0, len(sg.Ingress))
	for _, in := range sg.Ingress {
		m.Ingress = append(m.Ingress, ingressModel{
			Protocol: types.StringValue(in.Protocol),
			Port:     types.Int64Value(in.Port),
			CIDR:     types.StringValue(in.CIDR),
		})
	}
}
