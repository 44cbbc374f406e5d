output "greeting" {
  description = "The greeting, as applied."
  value       = terraform_data.greeting.output
}

output "id" {
  description = "The id terraform gave the resource: a new one each time greeting changes."
  value       = terraform_data.greeting.id
}
