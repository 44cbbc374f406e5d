module github.com/landform-dev/landform/hack/tools/terraform

go 1.26

require github.com/hashicorp/terraform v1.5.7
