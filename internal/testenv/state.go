package testenv

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
)

// State is what tests read of a Terraform state: its serial and lineage,
// the engine version that wrote it, and its resources with their
// instances' ids.
type State struct {
	Serial           int64  `json:"serial"`
	Lineage          string `json:"lineage"`
	TerraformVersion string `json:"terraform_version"`
	Resources        []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Attributes struct {
				ID string `json:"id"`
			} `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// ReadState decodes the state the kubernetes backend keeps in its Secret:
// gzip'd JSON under data's "tfstate". Its errors never quote the state,
// which may hold secrets.
func ReadState(data map[string][]byte) (State, error) {
	var st State
	zr, err := gzip.NewReader(bytes.NewReader(data["tfstate"]))
	if err != nil {
		return st, fmt.Errorf("the state is not gzip'd: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return st, fmt.Errorf("decompressing the state: %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("the state is not JSON: %w", err)
	}
	return st, nil
}

// StateData is a state Secret's data as the kubernetes backend writes it:
// a state of lineage and serial holding one terraform_data resource.
func StateData(lineage string, serial int) map[string][]byte {
	raw := fmt.Sprintf(`{"version":4,"serial":%d,"lineage":%q,"outputs":{},"resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[]}]}`, serial, lineage)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(raw))
	_ = zw.Close()
	return map[string][]byte{"tfstate": b.Bytes()}
}
