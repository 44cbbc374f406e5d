package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// maxOutputsMessage bounds the one message that is not chunked: the outputs.
const maxOutputsMessage = 256 << 20

// Client drives one runner. Every call takes everything it needs; the
// controller sets a deadline on each through its context.
type Client struct {
	conn *grpc.ClientConn
	rpc  runnerpb.RunnerClient
}

// PlanOutput is everything a plan produced.
type PlanOutput struct {
	Result    *runnerpb.PlanResult
	PlanFile  []byte
	JSONPlan  []byte
	HumanPlan []byte
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
	)
	if err != nil {
		return nil, fmt.Errorf("dial runner %s: %w", addr, err)
	}
	health := healthpb.NewHealthClient(conn)
	backoff := 50 * time.Millisecond
	var lastErr error
	for {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: runnerpb.Runner_ServiceDesc.ServiceName})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return &Client{conn: conn, rpc: runnerpb.NewRunnerClient(conn)}, nil
		}
		if err == nil {
			err = fmt.Errorf("health status %s", resp.GetStatus())
		}
		lastErr = err
		select {
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("runner %s not serving: %w (last error: %v)", addr, ctx.Err(), lastErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
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
		chunk := make([]byte, ChunkSize)
		n, rerr := io.ReadFull(tarball, chunk)
		if n > 0 {
			err = stream.Send(&runnerpb.UploadWorkspaceRequest{Msg: &runnerpb.UploadWorkspaceRequest_Chunk{Chunk: chunk[:n]}})
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

// Plan plans (the destruction of everything when destroy is set), passing
// each log line to logf (which may be nil).
func (c *Client) Plan(ctx context.Context, destroy bool, logf func(line string)) (*PlanOutput, error) {
	stream, err := c.rpc.Plan(ctx, &runnerpb.PlanRequest{Destroy: destroy})
	if err != nil {
		return nil, toError(err)
	}
	var planFile, jsonPlan, humanPlan bytes.Buffer
	var result *runnerpb.PlanResult
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, toError(err)
		}
		switch e := ev.Event.(type) {
		case *runnerpb.PlanEvent_Log:
			if logf != nil {
				logf(e.Log.GetText())
			}
		case *runnerpb.PlanEvent_PlanFileChunk:
			planFile.Write(e.PlanFileChunk)
		case *runnerpb.PlanEvent_JsonPlanChunk:
			jsonPlan.Write(e.JsonPlanChunk)
		case *runnerpb.PlanEvent_HumanPlanChunk:
			humanPlan.Write(e.HumanPlanChunk)
		case *runnerpb.PlanEvent_Result:
			result = e.Result
		}
	}
	if result == nil {
		return nil, errors.New("plan stream ended without a result")
	}
	return &PlanOutput{Result: result, PlanFile: planFile.Bytes(), JSONPlan: jsonPlan.Bytes(), HumanPlan: humanPlan.Bytes()}, nil
}

// Apply applies a saved plan file and returns the outputs.
func (c *Client) Apply(ctx context.Context, planFile []byte, logf func(string)) ([]*runnerpb.Output, error) {
	if len(planFile) == 0 {
		return nil, errors.New("apply: empty plan file")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Apply(ctx)
	if err != nil {
		return nil, toError(err)
	}
	err = stream.Send(&runnerpb.ApplyRequest{Msg: &runnerpb.ApplyRequest_Options{Options: &runnerpb.ApplyOptions{}}})
	if err == nil {
		err = sendChunks(planFile, func(b []byte) error {
			return stream.Send(&runnerpb.ApplyRequest{Msg: &runnerpb.ApplyRequest_PlanFileChunk{PlanFileChunk: b}})
		})
	}
	// On io.EOF the runner already ended the call; Recv tells why.
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, toError(err)
	}
	if err == nil {
		if err := stream.CloseSend(); err != nil {
			return nil, toError(err)
		}
	}
	return receiveApplyEvents(stream, logf)
}

// Destroy destroys everything in the state.
func (c *Client) Destroy(ctx context.Context, logf func(string)) error {
	stream, err := c.rpc.Destroy(ctx, &runnerpb.DestroyRequest{})
	if err != nil {
		return toError(err)
	}
	_, err = receiveApplyEvents(stream, logf)
	return err
}

// Outputs reads the outputs from the state.
func (c *Client) Outputs(ctx context.Context) ([]*runnerpb.Output, error) {
	resp, err := c.rpc.Outputs(ctx, &runnerpb.OutputsRequest{})
	if err != nil {
		return nil, toError(err)
	}
	return resp.GetOutputs(), nil
}

func receiveApplyEvents(stream interface {
	Recv() (*runnerpb.ApplyEvent, error)
}, logf func(string)) ([]*runnerpb.Output, error) {
	var result *runnerpb.ApplyResult
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, toError(err)
		}
		switch e := ev.Event.(type) {
		case *runnerpb.ApplyEvent_Log:
			if logf != nil {
				logf(e.Log.GetText())
			}
		case *runnerpb.ApplyEvent_Result:
			result = e.Result
		}
	}
	if result == nil {
		return nil, errors.New("stream ended without a result")
	}
	return result.GetOutputs(), nil
}
