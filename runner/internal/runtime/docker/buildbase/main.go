// Command buildbase builds an agent image from a static binary (FROM scratch,
// or -from an operating system image), with clawguard-mcp beside it
// (-mcp), through the Docker API (the same code path the runner and its
// tests use), for the Makefile:
//
//	go run ./internal/runtime/docker/buildbase -binary ../bin/demo-agent -mcp ../bin/clawguard-mcp -tag clawguard-agent-demo:latest
//	go run ./internal/runtime/docker/buildbase -from clawguard-debian:bookworm -binary ../bin/demo-agent -mcp ../bin/clawguard-mcp -tag clawguard-agent-demo-debian:latest
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

func main() {
	binary := flag.String("binary", "", "static agent binary to put at /agent")
	tag := flag.String("tag", "", "image tag to build, e.g. clawguard-agent-demo:latest")
	from := flag.String("from", "scratch", "base image (an OS image with apt-get gets approved packages installed)")
	mcp := flag.String("mcp", "", "static clawguard-mcp binary to put at "+docker.MCPBinaryPath)
	flag.Parse()
	if *binary == "" || *tag == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := docker.New(ctx, docker.Config{InstallID: "buildbase"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbase:", err)
		os.Exit(1)
	}
	defer r.Close()
	if err := r.BuildAgentBase(ctx, docker.BaseImage{From: *from, Agent: *binary, MCP: *mcp, Tag: *tag}); err != nil {
		fmt.Fprintln(os.Stderr, "buildbase:", err)
		os.Exit(1)
	}
	fmt.Println(*tag)
}
