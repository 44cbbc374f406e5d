# A module that requires a provider (the offline landform test provider,
# from bin/providers), so that init writes a dependency lock file that the
# plan records and the apply must match.
terraform {
  required_providers {
    landform = {
      source = "landform-dev/landform"
    }
  }
}

resource "terraform_data" "this" {
  input = "provider"
}

output "input" {
  value = terraform_data.this.output
}
