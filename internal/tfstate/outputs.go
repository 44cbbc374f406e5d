// Package tfstate reads what the controller needs from a state that
// Terraform's kubernetes backend keeps in a Secret, so that refreshing the
// outputs Secret needs no runner, no engine and no lock.
package tfstate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// dataKey is where the backend keeps the gzip'd state in its Secret.
const dataKey = "tfstate"

// maxState bounds the decompressed state read.
const maxState = 256 << 20

// state is the part of a state file this package reads.
type state struct {
	Outputs map[string]struct {
		Value     json.RawMessage `json:"value"`
		Type      json.RawMessage `json:"type"`
		Sensitive bool            `json:"sensitive"`
	} `json:"outputs"`
}

// Outputs reads the outputs of the state in Secret namespace/name, sorted
// by name. found is false when the Secret does not exist.
func Outputs(ctx context.Context, c client.Reader, namespace, name string) (outs []*runnerpb.Output, found bool, err error) {
	var secret corev1.Secret
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading state Secret %s/%s: %w", namespace, name, err)
	}
	outs, err = decodeOutputs(secret.Data[dataKey])
	if err != nil {
		return nil, true, fmt.Errorf("state Secret %s/%s: %w", namespace, name, err)
	}
	return outs, true, nil
}

func decodeOutputs(data []byte) ([]*runnerpb.Output, error) {
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
	outs := make([]*runnerpb.Output, 0, len(st.Outputs))
	for name, o := range st.Outputs {
		outs = append(outs, &runnerpb.Output{Name: name, ValueJson: o.Value, TypeJson: o.Type, Sensitive: o.Sensitive})
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
