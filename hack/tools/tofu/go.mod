module github.com/landform-dev/landform/hack/tools/tofu

go 1.26.6

require github.com/opentofu/opentofu v1.12.6

replace github.com/hashicorp/hcl/v2 v2.20.1 => github.com/opentofu/hcl/v2 v2.20.2-0.20251021132045-587d123c2828
