package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/landform-dev/landform/runner/internal/chunk"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// maxOutputsMessage bounds the one message that is not chunked: the outputs.
const maxOutputsMessage = 256 << 20

// dialBackoff spaces the health checks while a runner starts: 10ms,
// doubling up to a second, until the caller's context ends.
//
// The first step was 50ms: `make bench-cluster` then saw 0.15 s from a
// runner Pod's container running to its runner answering in most
// samples, once the controller saw the container start through the
// Pod's watch, without reading the Pod: it dialed before the runner
// listened, and the retries came at 50 and 150 ms. A refused connection
// on the node costs next to nothing, so the first retries are close.
var dialBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: time.Second}

// connectBackoff is gRPC's reconnect backoff, on dialBackoff's scale.
var connectBackoff = backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: time.Second}

// Client drives one runner. Every call takes everything it needs; the
// controller sets a deadline on each through its context.
type Client struct {
	conn *grpc.ClientConn
	rpc  runnerpb.RunnerClient
}

// Dial connects to the runner at addr (host:port, as net.JoinHostPort
// writes it) over mTLS and waits, bounded by ctx, until its health check
// reports SERVING.
func Dial(ctx context.Context, addr string, tlsConfig *tls.Config) (*Client, error) {
	if tlsConfig == nil {
		return nil, errors.New("dial runner: a TLS configuration is required")
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
		// A runner Pod can vanish without closing the connection;
		// keepalives turn that into an error instead of a silent hang.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 20 * time.Second, PermitWithoutStream: true}),
		// Outputs come back in one message; large ones (certificates,
		// kubeconfigs) must not hit gRPC's default 4 MiB limit.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxOutputsMessage)),
		// A runner Pod's container runs a moment before its runner
		// listens: the first connection is refused, and gRPC's default
		// reconnect backoff (1 s, jittered) then held the health checks
		// back; `make bench-cluster` saw 1.56 s to an answering runner in
		// 4 of 9 samples, against 0.01 s in the others. Reconnect as soon
		// as dialBackoff asks.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: connectBackoff, MinConnectTimeout: 5 * time.Second}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial runner %s: %w", addr, err)
	}
	health := healthpb.NewHealthClient(conn)
	var lastErr error
	err = dialBackoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: runnerpb.Runner_ServiceDesc.ServiceName})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return true, nil
		}
		if err == nil {
			err = fmt.Errorf("health status %s", resp.GetStatus())
		}
		lastErr = err
		return false, nil
	})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("runner %s not serving: %w (last error: %v)", addr, err, lastErr)
	}
	return &Client{conn: conn, rpc: runnerpb.NewRunnerClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// UploadWorkspace sends the spec and the tarball in chunks. When the runner
// already has this digest it answers at once and the rest of the tarball is
// not read.
func (c *Client) UploadWorkspace(ctx context.Context, spec *runnerpb.WorkspaceSpec, tarball io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.UploadWorkspace(ctx)
	if err != nil {
		return toError(err)
	}
	// Send returns io.EOF when the server ended the call (a no-op or an
	// error): its status then comes from CloseAndRecv.
	err = stream.Send(&runnerpb.UploadWorkspaceRequest{Msg: &runnerpb.UploadWorkspaceRequest_Spec{Spec: spec}})
	for err == nil {
		buf := make([]byte, chunk.Size)
		n, rerr := io.ReadFull(tarball, buf)
		if n > 0 {
			err = stream.Send(&runnerpb.UploadWorkspaceRequest{Msg: &runnerpb.UploadWorkspaceRequest_Chunk{Chunk: buf[:n]}})
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			// Cancelling makes the runner drop the partial upload.
			return fmt.Errorf("read tarball: %w", rerr)
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return toError(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return toError(err)
	}
	if resp.GetTarballDigest() != spec.GetTarballDigest() {
		return fmt.Errorf("runner acknowledged digest %q, sent %q", resp.GetTarballDigest(), spec.GetTarballDigest())
	}
	return nil
}

// Outputs reads the outputs from the state.
func (c *Client) Outputs(ctx context.Context) ([]*runnerpb.Output, error) {
	resp, err := c.rpc.Outputs(ctx, &runnerpb.OutputsRequest{})
	if err != nil {
		return nil, toError(err)
	}
	return resp.GetOutputs(), nil
}
