resource "terraform_data" "greeting" {
  input = var.greeting
}
