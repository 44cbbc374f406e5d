# Puts the content of large.txt (written by the test) into the plan, so that
# the plan file, the JSON plan and the human plan all span several chunks.
resource "terraform_data" "large" {
  input = file("${path.module}/large.txt")
}

output "sha256" {
  value = sha256(terraform_data.large.output)
}
