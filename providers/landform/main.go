// Command terraform-provider-landform is a small Terraform/OpenTofu provider
// for Landform's offline tests and examples. It talks to nothing but the
// local filesystem, so it works where HashiCorp's providers cannot be
// downloaded, and unlike the builtin terraform_data its resources observe
// out-of-band changes (drift).
//
// Build and install it into a filesystem mirror with
// hack/build-provider.sh MIRROR_DIR (from the repository root).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// Address is the provider source address this binary serves.
const Address = "registry.terraform.io/landform-dev/landform"

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run with support for debuggers (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()

	err := providerserver.Serve(context.Background(), New(version), providerserver.ServeOpts{
		Address: Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
