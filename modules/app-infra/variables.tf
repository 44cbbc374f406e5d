variable "name" {
  description = "Name of the application: the database's name, and the security group's prefix."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9_-]{0,59}$", var.name))
    error_message = "name must be 1 to 60 lowercase letters, digits, '-' and '_', starting with a letter."
  }
}

variable "db_size_gb" {
  description = "Storage of the database in GB."
  type        = number
  default     = 10

  validation {
    condition     = var.db_size_gb >= 1 && var.db_size_gb <= 16384 && floor(var.db_size_gb) == var.db_size_gb
    error_message = "db_size_gb must be a whole number from 1 to 16384."
  }
}

variable "allowed_cidr" {
  description = "Range allowed to reach the database on 5432, in canonical form (e.g. 10.0.0.0/8)."
  type        = string
  default     = "10.0.0.0/8"

  validation {
    condition     = can(cidrhost(var.allowed_cidr, 0)) && try(cidrsubnet(var.allowed_cidr, 0, 0) == var.allowed_cidr, false)
    error_message = "allowed_cidr must be a CIDR range without host bits, such as 10.0.0.0/8."
  }
}
