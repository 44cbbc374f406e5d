# Parses (init succeeds) but does not validate: the reference is undeclared.
resource "terraform_data" "a" {
  input = terraform_data.missing.id
}
