package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BuildLogFile is where, relative to the workspace, the agent finds the
// output of its group image's last build made for an approved change.
const BuildLogFile = ".clawguard/build.log"

// NotInstalled begins the build output's last line when approved packages
// were only recorded (/etc/clawguard/packages.json), not installed: the
// agent's base image has no package manager, or the runtime runs a binary
// as it is. What the agent and the approver are told says so.
const NotInstalled = "packages recorded, not installed:"

// MaxBuildLog bounds the build output kept (its first bytes).
const MaxBuildLog = 1 << 20

// BuildLog collects an image build's output (GroupImageSpec.Output) for the
// agent and the approver: the first MaxBuildLog bytes, the rest dropped.
type BuildLog struct{ buf bytes.Buffer }

func (l *BuildLog) Write(p []byte) (int, error) {
	if room := MaxBuildLog - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Len is how many bytes it holds (0: nothing was built).
func (l *BuildLog) Len() int { return l.buf.Len() }

// Keep writes the whole output into a session's workspace at BuildLogFile
// (atomically; readable by the agent's non-root user).
func (l *BuildLog) Keep(sessionDir string) error {
	path := filepath.Join(sessionDir, BuildLogFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, l.buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Summary is the output's last n lines as a terminal shows them, without
// the image builder's own bookkeeping: what the install printed.
func (l *BuildLog) Summary(n int) string { return lastLines(l.buf.String(), n) }

var ansiColour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// builderNoise are the image builder's own bookkeeping lines: left out of the
// summary so its last lines are what the install printed.
var builderNoise = regexp.MustCompile(`^(-*> ([0-9a-f]+$|Running in )|Removing intermediate container |Step \d+/\d+ : (LABEL|COPY|FROM|USER) |Successfully built )`)

func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		// As a terminal shows it: colours dropped, a line redrawn after \r
		// (progress counters) is its last state.
		l = ansiColour.ReplaceAllString(l, "")
		if i := strings.LastIndex(strings.TrimRight(l, "\r"), "\r"); i >= 0 {
			l = l[i+1:]
		}
		if l = strings.TrimSpace(l); l != "" && !builderNoise.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
