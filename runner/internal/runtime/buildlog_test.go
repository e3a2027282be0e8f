package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The summary shown with an install's outcome is what the install printed,
// not the image builder's bookkeeping.
func TestLastLinesSkipsBuilderBookkeeping(t *testing.T) {
	out := "Step 1/9 : FROM base:1\n ---> 0d180e27d109\nStep 3/9 : RUN apt-get install -y hello\n ---> Running in 8e1\n" +
		"\x1b[91mdebconf: delaying package configuration\n\x1b[0m(Reading database ... \r(Reading database ... 50%\r(Reading database ... 7177 files.)\n" +
		"Unpacking hello (2.10-3) ...\nSetting up hello (2.10-3) ...\nRemoving intermediate container 8e1\n ---> 77a7\n" +
		"Step 7/9 : LABEL dev.clawguard.config-version=2\n ---> Running in 573\nStep 9/9 : COPY packages.json /etc/clawguard/packages.json\n" +
		"Step 8/9 : RUN npm install -g x\n ---> Using cache\n ---> 1234567890ab\n" +
		"Successfully built f73e06b96085\nSuccessfully tagged clawguard-agent-g:2\n"
	want := "Step 3/9 : RUN apt-get install -y hello\ndebconf: delaying package configuration\n(Reading database ... 7177 files.)\nUnpacking hello (2.10-3) ...\nSetting up hello (2.10-3) ...\n" +
		"Step 8/9 : RUN npm install -g x\n---> Using cache\nSuccessfully tagged clawguard-agent-g:2"
	if got := lastLines(out, 15); got != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
	if got := lastLines(out, 2); got != "---> Using cache\nSuccessfully tagged clawguard-agent-g:2" {
		t.Fatalf("last 2: %q", got)
	}
}

// A build's output is kept up to MaxBuildLog bytes (its first ones), and
// kept for the agent at BuildLogFile in its workspace.
func TestBuildLogKeepsTheFirstBytesForTheAgent(t *testing.T) {
	var l BuildLog
	line := strings.Repeat("x", 1023) + "\n"
	for range MaxBuildLog/len(line) + 10 {
		if n, err := l.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if l.Len() != MaxBuildLog {
		t.Fatalf("kept %d bytes, want %d", l.Len(), MaxBuildLog)
	}
	dir := t.TempDir()
	if err := l.Keep(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, BuildLogFile)); err != nil || len(b) != MaxBuildLog {
		t.Fatalf("kept file: %d bytes, %v", len(b), err)
	}
}
