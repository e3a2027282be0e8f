// Command fsmcp is a tiny stdio MCP server for the runner's tests: it writes
// and reads files in its working directory, tells whether it was given its
// credential, and can add a tool while running (tools/list_changed).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type writeIn struct {
	Path    string `json:"path" jsonschema:"a relative path"`
	Content string `json:"content"`
}

type readIn struct {
	Path string `json:"path"`
}

type addIn struct {
	Name string `json:"name"`
}

type empty struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func local(p string) (string, error) {
	if p == "" || filepath.IsAbs(p) || strings.Contains(p, "..") {
		return "", errors.New("path must be relative and stay in the working directory")
	}
	return p, nil
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "fsmcp", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write content to a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
			p, err := local(in.Path)
			if err != nil {
				return nil, nil, err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			if _, err := f.WriteString(in.Content); err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			p, err := local(in.Path)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "credential", Description: "Say whether FS_TOKEN was given."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text("FS_TOKEN=" + os.Getenv("FS_TOKEN")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Add a tool that echoes (tools/list_changed)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: in.Name, Description: "An echo added at run time."},
				func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
					return text(in.Name), nil, nil
				})
			return text("added " + in.Name), nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
