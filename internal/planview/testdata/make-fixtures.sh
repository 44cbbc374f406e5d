#!/bin/sh
# make-fixtures.sh writes plan.json and drift.json: real OpenTofu plans of
# terraform_data resources and outputs, made offline (terraform_data is built in).
#
#   sh internal/planview/testdata/make-fixtures.sh [path/to/tofu]
#
# The module is applied with password=hunter2, engine=postgres15, two
# resources are dropped from the state to be imported again, then the
# module is changed and planned with password=s3cr3t-new, engine=postgres16.
# tofu's show -json is written as is (no reformatting: jq 1.6 would round
# 12345678901234567890).
#
# terraform_data reads back exactly what it stored, so no plan of it finds
# drift: drift.json is plan.json with a hand-written resource_drift (the
# shape tofu writes, ids from the state) inserted before resource_changes.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
tofu=${1:-$here/../../../bin/tofu}
case $tofu in /*) ;; *) tofu=$PWD/$tofu ;; esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
: >none.tfrc
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_CLI_CONFIG_FILE="$dir/none.tfrc"

common='
variable "password" {
  type      = string
  sensitive = true
}

variable "engine" {
  type = string
}

output "dsn" {
  value     = "postgres://admin:${var.password}@db:5432/app"
  sensitive = true
}

output "network_id" {
  value = terraform_data.network.id
}
'

cat >main.tf <<EOF
$common
resource "terraform_data" "network" {
  input = {
    name = "main"
    cidr = "10.0.0.0/16"
    tags = { Name = "main", Env = "dev" }
    subnets = [
      { cidr = "10.0.1.0/24", zone = "a" },
      { cidr = "10.0.2.0/24", zone = "b" },
    ]
  }
}

resource "terraform_data" "database" {
  input = {
    engine   = var.engine
    password = var.password
    size     = 10
    ports    = [5432]
  }
  triggers_replace = var.engine
}

resource "terraform_data" "old" {
  input = { note = "gone soon", count = 3 }
}

resource "terraform_data" "imported" {
  input = "kept"
}

resource "terraform_data" "adopted" {}
EOF
"$tofu" init -input=false >/dev/null
"$tofu" apply -auto-approve -input=false -var password=hunter2 -var engine=postgres15 >/dev/null
"$tofu" show -json >state.json
id() { jq -r --arg a "$1" '.values.root_module.resources[] | select(.address == $a) | .values.id' state.json; }
"$tofu" state rm terraform_data.imported terraform_data.adopted >/dev/null

cat >main.tf <<EOF
$common
resource "terraform_data" "network" {
  input = {
    name = "main"
    cidr = "10.0.0.0/16"
    mtu  = 12345678901234567890
    tags = { Name = "main", Env = "prod", "kubernetes.io/role" = "net" }
    subnets = [
      { cidr = "10.0.1.0/24", zone = "c" },
      { cidr = "10.0.2.0/24", zone = "b" },
      { cidr = "10.0.3.0/24", zone = "<a&b>" },
    ]
  }
}

resource "terraform_data" "database" {
  input = {
    engine   = var.engine
    password = var.password
    size     = 20
    ports    = [5432]
  }
  triggers_replace = var.engine
}

resource "terraform_data" "cache" {
  input = {
    name    = "cache"
    db      = terraform_data.database.id
    sizes   = [1, 2.5]
    empty   = []
    nothing = null
  }
}

output "cache_id" {
  value = terraform_data.cache.id
}

resource "terraform_data" "many" {
  input = range(205)
}

import {
  to = terraform_data.imported
  id = "$(id terraform_data.imported)"
}

resource "terraform_data" "imported" {
  input = "kept"
}

import {
  to = terraform_data.adopted
  id = "$(id terraform_data.adopted)"
}

resource "terraform_data" "adopted" {}
EOF
"$tofu" plan -input=false -out=plan.bin -var password=s3cr3t-new -var engine=postgres16 >/dev/null
"$tofu" show -json plan.bin >"$here/plan.json"

network=$(id terraform_data.network)
database=$(id terraform_data.database)
old=$(id terraform_data.old)
drift='"resource_drift":[
{"address":"terraform_data.database","mode":"managed","type":"terraform_data","name":"database","provider_name":"terraform.io/builtin/terraform","change":{"actions":["update"],
 "before":{"id":"'$database'","input":{"engine":"postgres15","password":"hunter2","ports":[5432],"size":10},"output":{"engine":"postgres15","password":"hunter2","ports":[5432],"size":10},"triggers_replace":"postgres15"},
 "after":{"id":"'$database'","input":{"engine":"postgres15","password":"changed-outside","ports":[5432],"size":12},"output":{"engine":"postgres15","password":"changed-outside","ports":[5432],"size":12},"triggers_replace":"postgres15"},
 "after_unknown":{},"before_sensitive":{"input":{"password":true,"ports":[false]},"output":{"password":true,"ports":[false]}},"after_sensitive":{"input":{"password":true,"ports":[false]},"output":{"password":true,"ports":[false]}}}},
{"address":"terraform_data.network","mode":"managed","type":"terraform_data","name":"network","provider_name":"terraform.io/builtin/terraform","change":{"actions":["update"],
 "before":{"id":"'$network'","input":{"cidr":"10.0.0.0/16","name":"main","subnets":[{"cidr":"10.0.1.0/24","zone":"a"},{"cidr":"10.0.2.0/24","zone":"b"}],"tags":{"Env":"dev","Name":"main"}},"output":{"cidr":"10.0.0.0/16","name":"main","subnets":[{"cidr":"10.0.1.0/24","zone":"a"},{"cidr":"10.0.2.0/24","zone":"b"}],"tags":{"Env":"dev","Name":"main"}},"triggers_replace":null},
 "after":{"id":"'$network'","input":{"cidr":"10.0.0.0/16","name":"main","subnets":[{"cidr":"10.0.1.0/24","zone":"a"},{"cidr":"10.0.2.0/24","zone":"b"}],"tags":{"Env":"staging","Name":"main"}},"output":{"cidr":"10.0.0.0/16","name":"main","subnets":[{"cidr":"10.0.1.0/24","zone":"a"},{"cidr":"10.0.2.0/24","zone":"b"}],"tags":{"Env":"staging","Name":"main"}},"triggers_replace":null},
 "after_unknown":{},"before_sensitive":{"input":{"subnets":[{},{}],"tags":{}},"output":{"subnets":[{},{}],"tags":{}}},"after_sensitive":{"input":{"subnets":[{},{}],"tags":{}},"output":{"subnets":[{},{}],"tags":{}}}}},
{"address":"terraform_data.old","mode":"managed","type":"terraform_data","name":"old","provider_name":"terraform.io/builtin/terraform","change":{"actions":["delete"],
 "before":{"id":"'$old'","input":{"count":3,"note":"gone soon"},"output":{"count":3,"note":"gone soon"},"triggers_replace":null},
 "after":null,"after_unknown":{},"before_sensitive":{"input":{},"output":{}},"after_sensitive":false}}
],'
plan=$(cat "$here/plan.json")
printf '%s\n' "${plan%%\"resource_changes\":*}$(printf '%s' "$drift" | tr -d '\n')\"resource_changes\":${plan#*\"resource_changes\":}" >"$here/drift.json"
