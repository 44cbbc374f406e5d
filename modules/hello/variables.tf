variable "greeting" {
  description = "The text the module keeps in its state."
  type        = string
  default     = "hello from Landform"
}
