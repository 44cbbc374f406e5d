// Package tfstate reads what Landform needs from a state that Terraform's
// kubernetes backend keeps in a Secret, so that reading the outputs needs
// no engine and no lock.
package tfstate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// DataKey is where the backend keeps the gzip'd state in its Secret.
const DataKey = "tfstate"

// maxState bounds the decompressed state read.
const maxState = 256 << 20

// ErrNotPlain is a state this package cannot read the outputs of: an
// OpenTofu encrypted state, or a format it does not know. The engine can.
var ErrNotPlain = errors.New("the state is not a plain version 4 state (encrypted?); its outputs are read by the engine")

// state is the part of a state file this package reads.
type state struct {
	Version       int             `json:"version"`
	EncryptedData json.RawMessage `json:"encrypted_data"`
	Outputs       map[string]struct {
		Value     json.RawMessage `json:"value"`
		Type      json.RawMessage `json:"type"`
		Sensitive bool            `json:"sensitive"`
	} `json:"outputs"`
}

// DecodeOutputs reads the outputs of the state kept in a state Secret's
// DataKey, sorted by name; none for an empty state.
func DecodeOutputs(data []byte) ([]*runnerpb.Output, error) {
	if len(data) == 0 {
		return nil, nil
	}
	raw, err := Decompress(data)
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		// The decoder's message may quote state content: say only where.
		return nil, fmt.Errorf("the state is not valid JSON")
	}
	if len(st.EncryptedData) > 0 || st.Version != 4 {
		return nil, ErrNotPlain
	}
	outs := make([]*runnerpb.Output, 0, len(st.Outputs))
	for name, o := range st.Outputs {
		var value, typ bytes.Buffer
		if json.Compact(&value, o.Value) != nil || json.Compact(&typ, o.Type) != nil {
			return nil, fmt.Errorf("output %q in the state is not valid JSON", name)
		}
		outs = append(outs, &runnerpb.Output{Name: name, ValueJson: value.Bytes(), TypeJson: typ.Bytes(), Sensitive: o.Sensitive})
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].Name < outs[j].Name })
	return outs, nil
}

// Decompress returns the state JSON the backend keeps gzip'd in its Secret.
func Decompress(data []byte) ([]byte, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the state is not gzip'd: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(gz, maxState+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing the state: %w", err)
	}
	if len(raw) > maxState {
		return nil, fmt.Errorf("the state is larger than %d bytes", maxState)
	}
	return raw, nil
}

// Compress gzips a state as the backend stores it.
func Compress(raw []byte) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	_, _ = gz.Write(raw)
	_ = gz.Close()
	return b.Bytes()
}
