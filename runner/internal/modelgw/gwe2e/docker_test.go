package gwe2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func dockerClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// buildClientImage builds the agent's image of the container test: FROM
// scratch, clawguard-init as its first process (the loopback forwarder to
// the mounted socket), the SDK client as its agent. No network at build.
func buildClientImage() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := dockerClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, f := range []struct{ name, path string }{{"clawguard-init", initBin}, {"sdkclient", clientBin}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		if err := add(f.name, data, 0o755); err != nil {
			return err
		}
	}
	dockerfile := "FROM scratch\nCOPY clawguard-init /usr/local/bin/clawguard-init\nCOPY sdkclient /agent\n" +
		"USER 65532:65532\nENTRYPOINT [\"/usr/local/bin/clawguard-init\", \"--\", \"/agent\"]\n"
	if err := add("Dockerfile", []byte(dockerfile), 0o644); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{clientImage}, NetworkMode: "none", Remove: true,
		ForceRemove: true, Version: build.BuilderV1, Labels: map[string]string{"clawguard.test": "modelgw-gwe2e"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// ran is a finished container: what its agent printed, and every file of
// its filesystem (docker export), to search for secrets.
type ran struct {
	stdout, stderr string
	files          map[string][]byte
	env            []string // the container's configured environment
}

// runAgent runs the client's image as an agent's container is run: no
// network, every capability dropped, the session's socket directory
// mounted at /run/clawguard, the given environment. It waits for the agent
// to exit and removes the container (only ever the one it made).
func runAgent(t *testing.T, socketDir string, env map[string]string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: clientImage, Env: envList, Labels: map[string]string{"clawguard.test": "modelgw-gwe2e"}},
		&container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Binds: []string{socketDir + ":/run/clawguard"}}, nil, nil, "")
	if err != nil {
		t.Fatalf("create the agent's container: %v", err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true}) })
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start the agent's container: %v", err)
	}
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatalf("wait for the agent's container: %v", err)
	}
	var out ran
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	stdcopy.StdCopy(&stdout, &stderr, logs)
	logs.Close()
	out.stdout, out.stderr = stdout.String(), stderr.String()
	info, err := cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	out.env = info.Config.Env
	out.files = exportFiles(t, ctx, cli, created.ID)
	return out
}

func exportFiles(t *testing.T, ctx context.Context, cli *client.Client, id string) map[string][]byte {
	t.Helper()
	rc, err := cli.ContainerExport(ctx, id)
	if err != nil {
		t.Fatalf("export the agent's container: %v", err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("read the container's export: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// lines are the agent's JSON lines by call.
func (r ran) lines(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	for dec.More() {
		var l map[string]any
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("the agent's output: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
		}
		out[fmt.Sprint(l["call"])] = l
	}
	return out
}
