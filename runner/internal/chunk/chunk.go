// Package chunk moves files over the runner protocol's streams in chunks of
// at most Size bytes, so that no gRPC message size limit ever applies. The
// client (package runner) and the server (package runner/server) both send
// and receive with it.
package chunk

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Size is the largest payload of one streamed message.
const Size = 1 << 20

// Send calls send with consecutive slices of data of at most Size.
func Send(data []byte, send func([]byte) error) error {
	for len(data) > 0 {
		n := min(len(data), Size)
		if err := send(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// ReceiveFile writes chunks from next into a new file at path until next
// returns io.EOF. next returns (nil, nil) for a message that carries no chunk.
func ReceiveFile(path string, next func() ([]byte, error)) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", path, err)
	}
	var n int64
	for {
		chunk, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.Close()
			return n, err
		}
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return n, fmt.Errorf("write %s: %w", path, err)
		}
		n += int64(len(chunk))
	}
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	return n, nil
}
