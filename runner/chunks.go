package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ChunkSize is the largest payload of one streamed message. Files travel in
// chunks so no gRPC message size limit ever applies.
const ChunkSize = 1 << 20

// sendChunks calls send with consecutive slices of data of at most ChunkSize.
func sendChunks(data []byte, send func([]byte) error) error {
	for len(data) > 0 {
		n := min(len(data), ChunkSize)
		if err := send(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// receiveFile writes chunks from next into a new file at path until next
// returns io.EOF. next returns (nil, nil) for a message that carries no chunk.
func receiveFile(path string, next func() ([]byte, error)) (int64, error) {
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
