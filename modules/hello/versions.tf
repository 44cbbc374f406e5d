terraform {
  # terraform_data is built in: no provider to install.
  required_version = ">= 1.4"
}
