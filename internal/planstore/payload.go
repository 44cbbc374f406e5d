package planstore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// The payload is a gzip'd tar of these files, so a stored plan can be
// inspected with standard tools once its chunks are concatenated.
const (
	filePlan  = "tfplan"
	fileJSON  = "plan.json"
	fileHuman = "plan.txt"
	// fileLock is the dependency lock file the plan was made with: the
	// apply uses it, so that it installs exactly the plan's providers.
	fileLock = ".terraform.lock.hcl"
)

func encode(p *Plan) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{filePlan, p.PlanFile}, {fileJSON, p.JSONPlan}, {fileHuman, p.HumanPlan}, {fileLock, p.LockFile}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decode fills p's byte fields from payload.
func decode(payload []byte, p *Plan) error {
	gz, err := gzip.NewReader(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		var dst *[]byte
		switch h.Name {
		case filePlan:
			dst = &p.PlanFile
		case fileJSON:
			dst = &p.JSONPlan
		case fileHuman:
			dst = &p.HumanPlan
		case fileLock:
			dst = &p.LockFile
		default:
			continue // written by a newer version
		}
		if *dst, err = io.ReadAll(tr); err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
	}
	return gz.Close()
}
