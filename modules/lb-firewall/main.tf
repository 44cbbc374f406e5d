# A firewall rule for a load balancer that Kubernetes created: a security
# group in Landform's stand-in cloud letting HTTPS in from the load
# balancer's address only. The address and hostname are read by Landform
# from the Service's status (varsFrom fields), which a load-balancer
# controller writes after the Service exists; see docs/handoffs.md.

variable "name" {
  description = "Name of the security group."
  type        = string
}

variable "lb_ip" {
  description = "The load balancer's address (the Service's .status.loadBalancer.ingress[0].ip)."
  type        = string

  validation {
    condition     = can(cidrhost("${var.lb_ip}/32", 0))
    error_message = "lb_ip must be an IPv4 address."
  }
}

variable "lb_hostname" {
  description = "The load balancer's DNS name (the Service's .status.loadBalancer.ingress[0].hostname)."
  type        = string
}

resource "landform_security_group" "lb" {
  name        = var.name
  description = "HTTPS from ${var.lb_hostname}"

  ingress {
    protocol = "tcp"
    port     = 443
    cidr     = "${var.lb_ip}/32"
  }
}

output "security_group_id" {
  value = landform_security_group.lb.id
}

output "lb_hostname" {
  value = var.lb_hostname
}
