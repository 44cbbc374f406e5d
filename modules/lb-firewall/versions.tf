terraform {
  required_providers {
    landform = {
      source  = "landform-dev/landform"
      version = "~> 0.1"
    }
  }
}
