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
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

	"github.com/clawguard/clawguard/proto/pkgname"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Where things live inside agent images.
const (
	AgentBinaryPath = "/agent"
	// MCPBinaryPath is clawguard-mcp, the agent's MCP server (an agent's
	// MCP host runs it over stdio; it reaches the runner only through the
	// gateway socket).
	MCPBinaryPath    = "/usr/local/bin/clawguard-mcp"
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

// Manifest is the group's packages, written into every
// group image at /etc/clawguard/packages.json (the agent and tests read it).
// On a base image with a package manager the packages are also installed
// (Installed); on one without (the FROM scratch default) they are recorded
// only.
type Manifest struct {
	Group         string   `json:"group"`
	ConfigVersion int64    `json:"config_version"`
	Apt           []string `json:"apt"`
	Npm           []string `json:"npm"`
	Installed     bool     `json:"installed"`
}

// NewManifest normalises a spec into its manifest: package lists sorted and
// deduplicated, so equal configs hash equally. The group's MCP servers are
// not in it: the runner hosts them outside the container (mcphost), so an
// image never carries their commands or secrets.
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
	return Manifest{Group: spec.GroupID, ConfigVersion: spec.ConfigVersion,
		Apt: norm(spec.AptPackages), Npm: norm(spec.NpmPackages)}
}

// Hash is the sha256 of the package lists (not the version),
// put on the image as a label.
func (m Manifest) Hash() string {
	b, _ := json.Marshal(struct {
		Apt []string `json:"apt"`
		Npm []string `json:"npm"`
	}{m.Apt, m.Npm})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// packageManagers says which package managers a base image has.
type packageManagers struct{ apt, npm bool }

func (p packageManagers) any() bool { return p.apt || p.npm }

// groupDockerfile is the group image's Dockerfile: on a base with a package
// manager the packages are installed (as root, then back to the base's
// user); either way the manifest is copied in. It refuses packages the base
// cannot install when it has a package manager at all: recorded-only is the
// offline default of bases without one, never a silent half install.
func groupDockerfile(base, baseUser string, m Manifest, pm packageManagers) (string, error) {
	// The guard's precheck allowed these names; checked again here, since
	// they are written into a RUN line.
	for _, p := range m.Apt {
		if !pkgname.Apt(p) {
			return "", fmt.Errorf("invalid apt package name %q", p)
		}
	}
	for _, p := range m.Npm {
		if !pkgname.Npm(p) {
			return "", fmt.Errorf("invalid npm package name %q", p)
		}
	}
	var b strings.Builder
	b.WriteString("FROM " + base + "\n")
	if pm.any() && len(m.Apt)+len(m.Npm) > 0 {
		if len(m.Apt) > 0 && !pm.apt {
			return "", fmt.Errorf("base image %s has no apt-get: the apt packages %s cannot be installed", base, strings.Join(m.Apt, ", "))
		}
		if len(m.Npm) > 0 && !pm.npm {
			return "", fmt.Errorf("base image %s has no npm: the npm packages %s cannot be installed", base, strings.Join(m.Npm, ", "))
		}
		b.WriteString("USER root\n")
		if len(m.Apt) > 0 {
			b.WriteString("RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " +
				strings.Join(m.Apt, " ") + " && rm -rf /var/lib/apt/lists/*\n")
		}
		if len(m.Npm) > 0 {
			b.WriteString("RUN npm install -g " + strings.Join(m.Npm, " ") + "\n")
		}
		if baseUser != "" {
			b.WriteString("USER " + baseUser + "\n")
		}
	}
	b.WriteString("COPY packages.json " + PackagesManifest + "\n")
	return b.String(), nil
}

// packageManagers looks for apt-get and npm in an image, through a created
// (never started) container: no network, nothing runs. Remembered per image id.
func (r *Runtime) packageManagers(ctx context.Context, imageID string) (packageManagers, error) {
	r.pmMu.Lock()
	pm, ok := r.pmCache[imageID]
	r.pmMu.Unlock()
	if ok {
		return pm, nil
	}
	created, err := r.cli.ContainerCreate(ctx, &container.Config{
		Image: imageID, Entrypoint: []string{"/nonexistent"}, NetworkDisabled: true,
		Labels: map[string]string{rt.LabelInstall: r.cfg.InstallID},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return pm, fmt.Errorf("look for package managers in %s: %w", imageID, err)
	}
	defer r.remove(context.WithoutCancel(ctx), created.ID)
	// Only "no such file" means absent: any other error must not turn an
	// install into a silent record-only build.
	var statErr error
	has := func(paths ...string) bool {
		for _, p := range paths {
			_, err := r.cli.ContainerStatPath(ctx, created.ID, p)
			if err == nil {
				return true
			}
			if !errdefs.IsNotFound(err) && statErr == nil {
				statErr = fmt.Errorf("look for %s in %s: %w", p, imageID, err)
			}
		}
		return false
	}
	pm = packageManagers{apt: has("/usr/bin/apt-get"), npm: has("/usr/bin/npm", "/usr/local/bin/npm")}
	if statErr != nil {
		return pm, statErr
	}
	r.pmMu.Lock()
	if r.pmCache == nil {
		r.pmCache = map[string]packageManagers{}
	}
	r.pmCache[imageID] = pm
	r.pmMu.Unlock()
	return pm, nil
}

// BuildGroupImage builds clawguard-agent-<group>:<version> from the group's
// base image: its packages installed when the base has a package manager
// (the build then uses the build network, for the package sources), and
// the packages manifest. Without packages to install it builds with no
// network. An image with that tag, base and packages hash is reused.
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
	if r.tools != nil {
		labels[LabelToolsHash] = r.tools.hash
	}
	if img, err := r.cli.ImageInspect(ctx, tag); err == nil && img.Config != nil &&
		img.Config.Labels[rt.LabelPackagesHash] == hash && img.Config.Labels[LabelBaseImage] == base.ID &&
		img.Config.Labels[LabelToolsHash] == labels[LabelToolsHash] {
		return tag, nil // already built from the same base, packages and tools
	} else if err != nil && !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect %s: %w", tag, err)
	}

	var pm packageManagers
	if len(manifest.Apt)+len(manifest.Npm) > 0 {
		if pm, err = r.packageManagers(ctx, base.ID); err != nil {
			return "", fmt.Errorf("group %s: %w", spec.GroupID, err)
		}
	}
	baseUser := ""
	if base.Config != nil {
		baseUser = base.Config.User
	}
	dockerfile, err := groupDockerfile(spec.BaseImage, baseUser, manifest, pm)
	if err != nil {
		return "", fmt.Errorf("group %s: %w", spec.GroupID, err)
	}
	network := "none"
	if strings.Contains(dockerfile, "\nRUN ") {
		manifest.Installed = true
		network = r.cfg.BuildNetwork
	}
	manifestJSON, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	files := map[string]tarFile{"packages.json": {data: append(manifestJSON, '\n'), mode: 0o644}}
	if r.tools != nil {
		var entrypoint, cmd []string
		if base.Config != nil {
			entrypoint, cmd = base.Config.Entrypoint, base.Config.Cmd
		}
		if dockerfile, err = r.tools.addTo(dockerfile, entrypoint, cmd, files); err != nil {
			return "", fmt.Errorf("group %s: %w", spec.GroupID, err)
		}
	}
	files["Dockerfile"] = tarFile{data: []byte(dockerfile), mode: 0o644}
	buildCtx, err := tarContext(files)
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := r.build(ctx, buildCtx, tag, labels, network, spec.Output); err != nil {
		return "", fmt.Errorf("build group image %s: %w", tag, err)
	}
	noteNotInstalled(spec, manifest)
	r.log.Info("group image built", "group", spec.GroupID, "image", tag, "packages_sha256", hash,
		"installed", manifest.Installed, "network", network, "took", time.Since(start).Round(time.Millisecond))
	r.pruneGroupImages(ctx, spec.GroupID, spec.ConfigVersion)
	return tag, nil
}

// BuildBaseImage builds a FROM scratch image holding only the static binary
// at /agent, run as nobody. Test images come from here.
func (r *Runtime) BuildBaseImage(ctx context.Context, binaryPath, tag string) error {
	return r.BuildAgentBase(ctx, BaseImage{Agent: binaryPath, Tag: tag})
}

// BuildBaseImageFrom is BuildBaseImage on another base: an operating system
// image with a package manager (see deploy/local/debian-image.sh), so the
// packages its groups are approved get installed.
func (r *Runtime) BuildBaseImageFrom(ctx context.Context, from, binaryPath, tag string) error {
	return r.BuildAgentBase(ctx, BaseImage{From: from, Agent: binaryPath, Tag: tag})
}

// BaseImage is an agent base image: the agent at /agent (its entrypoint,
// run as nobody) and, when MCP is set, clawguard-mcp at MCPBinaryPath, on
// From. Both binaries must be static. Group images are built FROM it, so
// they carry both.
type BaseImage struct {
	From  string // base image (default scratch)
	Agent string // the agent binary
	MCP   string // the clawguard-mcp binary ("" = none)
	Tag   string
}

// BuildAgentBase builds a BaseImage.
func (r *Runtime) BuildAgentBase(ctx context.Context, b BaseImage) error {
	if b.From == "" {
		b.From = "scratch"
	}
	if !imageRefPattern.MatchString(b.Tag) {
		return fmt.Errorf("base image tag %q is not a plain image reference", b.Tag)
	}
	if !imageRefPattern.MatchString(b.From) {
		return fmt.Errorf("base image %q is not a plain image reference", b.From)
	}
	files := map[string]tarFile{}
	dockerfile := "FROM " + b.From + "\n"
	for _, bin := range []struct{ src, name, dst string }{{b.Agent, "agent", AgentBinaryPath}, {b.MCP, "clawguard-mcp", MCPBinaryPath}} {
		if bin.src == "" {
			if bin.name == "agent" {
				return errors.New("base image: no agent binary")
			}
			continue
		}
		data, err := os.ReadFile(bin.src)
		if err != nil {
			return fmt.Errorf("base image: %w", err)
		}
		if err := checkStatic(data); err != nil {
			return fmt.Errorf("base image: %s: %w", bin.src, err)
		}
		files[bin.name] = tarFile{data: data, mode: 0o755}
		dockerfile += "COPY " + bin.name + " " + bin.dst + "\n"
	}
	dockerfile += "USER " + DefaultUser + "\n" +
		`ENTRYPOINT ["` + AgentBinaryPath + `"]` + "\n"
	files["Dockerfile"] = tarFile{data: []byte(dockerfile), mode: 0o644}
	buildCtx, err := tarContext(files)
	if err != nil {
		return err
	}
	if err := r.build(ctx, buildCtx, b.Tag, nil, "none", nil); err != nil {
		return fmt.Errorf("build base image %s: %w", b.Tag, err)
	}
	r.log.Info("base image built", "image", b.Tag, "from", b.From, "agent", b.Agent, "mcp", b.MCP)
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

// build runs a classic build on network, copying its output to out (when
// set), and reports the daemon's error message with the output's last lines
// if the build fails (the HTTP call itself succeeds either way).
func (r *Runtime) build(ctx context.Context, buildCtx io.Reader, tag string, labels map[string]string, network string, out io.Writer) error {
	resp, err := r.cli.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{
		Tags:        []string{tag},
		Labels:      labels,
		NetworkMode: network,
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
		if out != nil && msg.Stream != "" {
			_, _ = io.WriteString(out, msg.Stream)
		}
		if line := strings.TrimSpace(msg.Stream); line != "" {
			tail = append(tail, line)
			if len(tail) > 8 {
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

// noteNotInstalled ends the build output with rt.NotInstalled when the
// group's packages were only recorded (a base image with no package
// manager), so what the agent and the approver are told is true.
func noteNotInstalled(spec rt.GroupImageSpec, m Manifest) {
	if !m.Installed && len(m.Apt)+len(m.Npm) > 0 && spec.Output != nil {
		fmt.Fprintf(spec.Output, "%s the base image %s has no package manager; they are listed in /etc/clawguard/packages.json only\n",
			rt.NotInstalled, spec.BaseImage)
	}
}
