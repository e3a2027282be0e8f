package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/errdefs"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Where things live inside agent images.
const (
	AgentBinaryPath  = "/agent"
	PackagesManifest = "/etc/clawguard/packages.json"
	// LabelBaseImage records the base image id a group image was built from,
	// so a rebuilt base forces a rebuilt group image.
	LabelBaseImage = "dev.clawguard.base-image"
)

// imageRefPattern is a conservative image reference: no whitespace or
// anything else that could break out of a Dockerfile FROM line.
var imageRefPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// groupRepoPattern is what a group id must look like inside an image name.
var groupRepoPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,100}$`)

// GroupImageTag is the image of a group at a config version:
// clawguard-agent-<group>:<configversion>.
func GroupImageTag(groupID string, configVersion int64) (string, error) {
	if !groupRepoPattern.MatchString(groupID) {
		return "", fmt.Errorf("group id %q cannot name an image (want lower-case letters, digits, '.', '_', '-')", groupID)
	}
	if configVersion < 0 {
		return "", fmt.Errorf("config version %d is negative", configVersion)
	}
	return "clawguard-agent-" + groupID + ":" + strconv.FormatInt(configVersion, 10), nil
}

// Manifest is what "installing" packages writes into a group image. The
// images are FROM scratch and nothing can be downloaded, so the package
// install is recorded rather than performed; the agent (and tests) read it
// at /etc/clawguard/packages.json.
type Manifest struct {
	Group         string         `json:"group"`
	ConfigVersion int64          `json:"config_version"`
	Apt           []string       `json:"apt"`
	Npm           []string       `json:"npm"`
	MCPServers    []rt.MCPServer `json:"mcp_servers"`
}

// NewManifest normalises a spec into its manifest: package lists sorted and
// deduplicated, MCP servers sorted by name, so equal configs hash equally.
func NewManifest(spec rt.GroupImageSpec) Manifest {
	norm := func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		out = slices.Compact(out)
		if out == nil {
			out = []string{}
		}
		return out
	}
	mcp := slices.Clone(spec.MCPServers)
	slices.SortStableFunc(mcp, func(a, b rt.MCPServer) int { return strings.Compare(a.Name, b.Name) })
	if mcp == nil {
		mcp = []rt.MCPServer{}
	}
	return Manifest{Group: spec.GroupID, ConfigVersion: spec.ConfigVersion,
		Apt: norm(spec.AptPackages), Npm: norm(spec.NpmPackages), MCPServers: mcp}
}

// Hash is the sha256 of the package lists and MCP servers (not the version),
// put on the image as a label.
func (m Manifest) Hash() string {
	b, _ := json.Marshal(struct {
		Apt []string       `json:"apt"`
		Npm []string       `json:"npm"`
		MCP []rt.MCPServer `json:"mcp_servers"`
	}{m.Apt, m.Npm, m.MCPServers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// BuildGroupImage builds clawguard-agent-<group>:<version> from the group's
// base image plus its packages manifest, without network. An image with that
// tag and the same packages hash is reused.
func (r *Runtime) BuildGroupImage(ctx context.Context, spec rt.GroupImageSpec) (string, error) {
	tag, err := GroupImageTag(spec.GroupID, spec.ConfigVersion)
	if err != nil {
		return "", err
	}
	if !imageRefPattern.MatchString(spec.BaseImage) {
		return "", fmt.Errorf("group %s: base image %q is not a plain image reference", spec.GroupID, spec.BaseImage)
	}
	manifest := NewManifest(spec)
	hash := manifest.Hash()
	labels := map[string]string{
		rt.LabelGroup:         spec.GroupID,
		rt.LabelConfigVersion: strconv.FormatInt(spec.ConfigVersion, 10),
		rt.LabelPackagesHash:  hash,
	}

	base, err := r.cli.ImageInspect(ctx, spec.BaseImage)
	if err != nil {
		return "", fmt.Errorf("group %s: base image %s: %w", spec.GroupID, spec.BaseImage, err)
	}
	labels[LabelBaseImage] = base.ID
	if img, err := r.cli.ImageInspect(ctx, tag); err == nil && img.Config != nil &&
		img.Config.Labels[rt.LabelPackagesHash] == hash && img.Config.Labels[LabelBaseImage] == base.ID {
		return tag, nil // already built from the same base and packages
	} else if err != nil && !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect %s: %w", tag, err)
	}

	manifestJSON, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	dockerfile := "FROM " + spec.BaseImage + "\n" +
		"COPY packages.json " + PackagesManifest + "\n"
	buildCtx, err := tarContext(map[string]tarFile{
		"Dockerfile":    {data: []byte(dockerfile), mode: 0o644},
		"packages.json": {data: append(manifestJSON, '\n'), mode: 0o644},
	})
	if err != nil {
		return "", err
	}
	if err := r.build(ctx, buildCtx, tag, labels); err != nil {
		return "", fmt.Errorf("build group image %s: %w", tag, err)
	}
	r.log.Info("group image built", "group", spec.GroupID, "image", tag, "packages_sha256", hash)
	return tag, nil
}

// BuildBaseImage builds a FROM scratch image holding only the static binary
// at /agent, run as nobody. The demo agent image and test images come from here.
func (r *Runtime) BuildBaseImage(ctx context.Context, binaryPath, tag string) error {
	if !imageRefPattern.MatchString(tag) {
		return fmt.Errorf("base image tag %q is not a plain image reference", tag)
	}
	bin, err := os.ReadFile(binaryPath)
	if err != nil {
		return fmt.Errorf("base image: %w", err)
	}
	if err := checkStatic(bin); err != nil {
		return fmt.Errorf("base image: %s: %w", binaryPath, err)
	}
	dockerfile := "FROM scratch\n" +
		"COPY agent " + AgentBinaryPath + "\n" +
		"USER " + DefaultUser + "\n" +
		`ENTRYPOINT ["` + AgentBinaryPath + `"]` + "\n"
	buildCtx, err := tarContext(map[string]tarFile{
		"Dockerfile": {data: []byte(dockerfile), mode: 0o644},
		"agent":      {data: bin, mode: 0o755},
	})
	if err != nil {
		return err
	}
	if err := r.build(ctx, buildCtx, tag, nil); err != nil {
		return fmt.Errorf("build base image %s: %w", tag, err)
	}
	r.log.Info("base image built", "image", tag, "binary", binaryPath)
	return nil
}

// checkStatic refuses what cannot run in a FROM scratch image: anything not
// ELF, or an ELF needing a dynamic loader.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// build runs a classic, network-less build and reports the daemon's error
// message if the build fails (the HTTP call itself succeeds either way).
func (r *Runtime) build(ctx context.Context, buildCtx io.Reader, tag string, labels map[string]string) error {
	resp, err := r.cli.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{
		Tags:        []string{tag},
		Labels:      labels,
		NetworkMode: "none",
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tail []string // last output lines, for the error message
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading build output: %w", err)
		}
		if msg.Error != "" || msg.ErrorDetail.Message != "" {
			detail := msg.ErrorDetail.Message
			if detail == "" {
				detail = msg.Error
			}
			return fmt.Errorf("%s (output: %s)", detail, strings.Join(tail, " | "))
		}
		if line := strings.TrimSpace(msg.Stream); line != "" {
			tail = append(tail, line)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
	}
}

type tarFile struct {
	data []byte
	mode int64
}

// tarContext packs files into an in-memory build context.
func tarContext(files map[string]tarFile) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	epoch := time.Unix(0, 0)
	for _, name := range names {
		f := files[name]
		hdr := &tar.Header{Name: name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return &buf, nil
}
