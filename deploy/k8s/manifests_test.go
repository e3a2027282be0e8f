// Package k8s holds the kustomize base; this test renders it and checks that
// the objects issue 8 asks for are there and fit together (selectors match
// pod labels, probes hit the gRPC port, the runner has its socket).
package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/clawguard/clawguard/deploy/internal/manifest"
)

// obj is a rendered Kubernetes object; fields are read with get.
// The decoded objects and their readers (shared with the other deploy tests).
type obj = manifest.Obj

var (
	get  = manifest.Get
	str  = manifest.Str
	list = manifest.List
)

func strMap(v any, path ...string) map[string]string {
	out := map[string]string{}
	m, _ := get(v, path...).(map[string]any)
	for k, val := range m {
		out[k] = fmt.Sprint(val)
	}
	return out
}

func decodeAll(r io.Reader, into *[]obj) error {
	dec := yaml.NewDecoder(r)
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if o != nil {
			*into = append(*into, obj(o))
		}
	}
}

// render runs `kubectl kustomize` when kubectl is installed; otherwise it
// assembles the kustomization's resources itself and applies its namespace
// (the base uses no other kustomize feature that changes what is checked here).
func render(t *testing.T) []obj {
	t.Helper()
	var objs []obj
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd := exec.Command(kubectl, "kustomize", "base")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl kustomize base: %v\n%s", err, stderr.String())
		}
		if err := decodeAll(bytes.NewReader(out), &objs); err != nil {
			t.Fatalf("parse rendered base: %v", err)
		}
		t.Logf("rendered with %s", kubectl)
		return objs
	}
	data, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	for _, r := range k.Resources {
		f, err := os.Open(filepath.Join("base", r))
		if err != nil {
			t.Fatalf("resource %s: %v", r, err)
		}
		err = decodeAll(f, &objs)
		f.Close()
		if err != nil {
			t.Fatalf("parse %s: %v", r, err)
		}
	}
	for _, o := range objs {
		if o.Kind() != "Namespace" {
			get(o, "metadata").(map[string]any)["namespace"] = k.Namespace
		}
	}
	t.Log("kubectl not found: assembled the resources list by hand")
	return objs
}

func find(t *testing.T, objs []obj, kind, name string) obj {
	t.Helper()
	for _, o := range objs {
		if o.Kind() == kind && o.Name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered base", kind, name)
	return nil
}

func containers(o obj) []any { return list(o, "spec", "template", "spec", "containers") }

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func args(c any) []string {
	var out []string
	for _, a := range list(c, "args") {
		out = append(out, fmt.Sprint(a))
	}
	return out
}

// flag returns the value following name in args, or "".
func flag(args []string, name string) string {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func TestBaseRendersEveryObject(t *testing.T) {
	objs := render(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.Kind()+"/"+o.Name())
		if o.Kind() != "Namespace" && str(o, "metadata", "namespace") != "clawguard" {
			t.Errorf("%s/%s is not in namespace clawguard", o.Kind(), o.Name())
		}
	}
	slices.Sort(got)
	want := []string{
		"DaemonSet/clawguard-runner",
		"Deployment/clawguard-server",
		"Job/clawguard-migrate",
		"Namespace/clawguard",
		"NetworkPolicy/clawguard-metrics",
		"NetworkPolicy/clawguard-server-grpc",
		"NetworkPolicy/default-deny-ingress",
		"PodDisruptionBudget/clawguard-server",
		"PrometheusRule/clawguard",
		"Service/clawguard-runner",
		"Service/clawguard-server",
		"ServiceMonitor/clawguard-runner",
		"ServiceMonitor/clawguard-server",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}
}

func TestServerDeploymentIsHighlyAvailableAndProbedOverGRPC(t *testing.T) {
	objs := render(t)
	d := find(t, objs, "Deployment", "clawguard-server")
	if r, _ := get(d, "spec", "replicas").(int); r < 2 {
		t.Errorf("server replicas = %v, want >= 2", get(d, "spec", "replicas"))
	}
	if mu := fmt.Sprint(get(d, "spec", "strategy", "rollingUpdate", "maxUnavailable")); mu != "0" {
		t.Errorf("rolling update maxUnavailable = %s, want 0", mu)
	}
	podLabels := strMap(d, "spec", "template", "metadata", "labels")
	if !selects(strMap(d, "spec", "selector", "matchLabels"), podLabels) {
		t.Error("deployment selector does not match its pod labels")
	}
	cs := containers(d)
	if len(cs) != 1 {
		t.Fatalf("server pod has %d containers, want 1", len(cs))
	}
	c := cs[0]
	a := args(c)
	if len(a) == 0 || a[0] != "serve" {
		t.Errorf("server args = %v, want serve ...", a)
	}
	if slices.Contains(a, "--auto-migrate") {
		t.Error("server runs --auto-migrate; the migration Job owns schema changes")
	}
	if flag(a, "--listen") != "0.0.0.0:7443" || flag(a, "--metrics-listen") != "0.0.0.0:9464" {
		t.Errorf("server listens on %q / metrics %q", flag(a, "--listen"), flag(a, "--metrics-listen"))
	}
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		if port := fmt.Sprint(get(c, probe, "grpc", "port")); port != "7443" {
			t.Errorf("%s: grpc port = %s, want 7443 (grpc.health.v1)", probe, port)
		}
	}
	dbFromSecret := false
	for _, e := range list(c, "env") {
		dbFromSecret = dbFromSecret || (str(e, "name") == "CLAWGUARD_DATABASE_URL" && str(e, "valueFrom", "secretKeyRef", "name") != "")
	}
	if !dbFromSecret {
		t.Error("server does not read CLAWGUARD_DATABASE_URL from a Secret")
	}
	// The server runs as a non-root user: its secret files must be group-readable by its fsGroup.
	if get(d, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("server pods may run as root")
	}
	fsGroup := get(d, "spec", "template", "spec", "securityContext", "fsGroup")
	for _, v := range list(d, "spec", "template", "spec", "volumes") {
		if get(v, "secret") == nil {
			continue
		}
		mode, _ := get(v, "secret", "defaultMode").(int)
		if mode&0o040 == 0 || fsGroup == nil {
			t.Errorf("secret volume %s (mode %o, fsGroup %v) is unreadable by the non-root server", str(v, "name"), mode, fsGroup)
		}
	}
	tokenFile := flag(a, "--operator-token-file")
	if !mountedUnder(c, tokenFile) {
		t.Errorf("--operator-token-file %q is not under any volume mount", tokenFile)
	}

	pdb := find(t, objs, "PodDisruptionBudget", "clawguard-server")
	if !selects(strMap(pdb, "spec", "selector", "matchLabels"), podLabels) {
		t.Error("PodDisruptionBudget does not select the server pods")
	}
	if m, _ := get(pdb, "spec", "minAvailable").(int); m < 1 {
		t.Errorf("PodDisruptionBudget minAvailable = %v, want >= 1", get(pdb, "spec", "minAvailable"))
	}

	svc := find(t, objs, "Service", "clawguard-server")
	if !selects(strMap(svc, "spec", "selector"), podLabels) {
		t.Error("Service clawguard-server does not select the server pods")
	}
	if ports := servicePorts(svc); ports["grpc"] != "7443" || ports["metrics"] != "9464" {
		t.Errorf("Service clawguard-server ports = %v, want grpc 7443 and metrics 9464", ports)
	}
}

func mountedUnder(c any, path string) bool {
	for _, m := range list(c, "volumeMounts") {
		mp := str(m, "mountPath")
		if path != "" && strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/") {
			return true
		}
	}
	return false
}

func servicePorts(svc obj) map[string]string {
	out := map[string]string{}
	for _, p := range list(svc, "spec", "ports") {
		out[str(p, "name")] = fmt.Sprint(get(p, "port"))
	}
	return out
}

func TestMigrationJobRunsMigrate(t *testing.T) {
	objs := render(t)
	j := find(t, objs, "Job", "clawguard-migrate")
	cs := containers(j)
	if len(cs) != 1 || !slices.Equal(args(cs[0]), []string{"migrate"}) {
		t.Fatalf("migration job containers/args = %v", cs)
	}
	if img, srv := str(cs[0], "image"), str(containers(find(t, objs, "Deployment", "clawguard-server"))[0], "image"); img != srv {
		t.Errorf("migration image %q differs from the server's %q", img, srv)
	}
	if rp := str(j, "spec", "template", "spec", "restartPolicy"); rp != "OnFailure" && rp != "Never" {
		t.Errorf("restartPolicy = %q", rp)
	}
}

func TestRunnerDaemonSetHasDockerSocketAndItsOwnToken(t *testing.T) {
	objs := render(t)
	ds := find(t, objs, "DaemonSet", "clawguard-runner")
	c := containers(ds)[0]
	a := args(c)
	if flag(a, "--runtime") != "docker" {
		t.Errorf("runner --runtime = %q, want docker", flag(a, "--runtime"))
	}
	if flag(a, "--server") != "clawguard-server:7443" {
		t.Errorf("runner --server = %q, want the clawguard-server Service", flag(a, "--server"))
	}
	// The runner id and its token file are both the node name: tokens are bound to one runner id.
	if flag(a, "--id") != "$(NODE_NAME)" || !strings.HasSuffix(flag(a, "--token-file"), "/$(NODE_NAME)") {
		t.Errorf("runner --id %q / --token-file %q are not per node", flag(a, "--id"), flag(a, "--token-file"))
	}
	nodeName := false
	for _, e := range list(c, "env") {
		nodeName = nodeName || (str(e, "name") == "NODE_NAME" && str(e, "valueFrom", "fieldRef", "fieldPath") == "spec.nodeName")
	}
	if !nodeName {
		t.Error("NODE_NAME is not taken from spec.nodeName")
	}
	if !mountedUnder(c, flag(a, "--token-file")) {
		t.Error("runner token file is not under a volume mount")
	}

	hostPaths := map[string]string{} // volume name → host path
	for _, v := range list(ds, "spec", "template", "spec", "volumes") {
		if p := str(v, "hostPath", "path"); p != "" {
			hostPaths[str(v, "name")] = p
		}
	}
	mounts := map[string]string{} // volume name → mount path
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "name")] = str(m, "mountPath")
	}
	sock := false
	for name, hp := range hostPaths {
		if hp == "/var/run/docker.sock" && mounts[name] == "/var/run/docker.sock" {
			sock = true
		}
	}
	if !sock {
		t.Error("the Docker socket is not mounted from the node")
	}
	dataDir := flag(a, "--data-dir")
	sameDir := false
	for name, hp := range hostPaths {
		sameDir = sameDir || (hp == dataDir && mounts[name] == dataDir)
	}
	if !sameDir {
		t.Errorf("--data-dir %q is not a hostPath mounted at the same path (dockerd resolves agent mounts on the node)", dataDir)
	}

	svc := find(t, objs, "Service", "clawguard-runner")
	if !selects(strMap(svc, "spec", "selector"), strMap(ds, "spec", "template", "metadata", "labels")) {
		t.Error("Service clawguard-runner does not select the runner pods")
	}
	if servicePorts(svc)["metrics"] != "9465" || flag(a, "--metrics-listen") != "0.0.0.0:9465" {
		t.Error("runner metrics port is not 9465 on both the pod and the Service")
	}
	// Issue 33: probed on what the runner serves next to /metrics.
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got, port := str(c, probe, "httpGet", "path"), str(c, probe, "httpGet", "port"); got != path || port != "metrics" {
			t.Errorf("runner %s = GET %q on port %q, want %s on the metrics port", probe, got, port, path)
		}
	}
}

// TestServiceMonitorsScrapeTheJobsTheAlertsName: alerts.yml selects
// job="clawguard-server"; the operator names the job after the Service.
func TestServiceMonitorsScrapeTheJobsTheAlertsName(t *testing.T) {
	objs := render(t)
	for _, job := range []string{"clawguard-server", "clawguard-runner"} {
		sm := find(t, objs, "ServiceMonitor", job)
		svc := find(t, objs, "Service", job)
		if !selects(strMap(sm, "spec", "selector", "matchLabels"), strMap(svc, "metadata", "labels")) {
			t.Errorf("ServiceMonitor %s does not select Service %s", job, job)
		}
		eps := list(sm, "spec", "endpoints")
		if len(eps) != 1 || servicePorts(svc)[str(eps[0], "port")] == "" || str(eps[0], "path") != "/metrics" {
			t.Errorf("ServiceMonitor %s endpoint %v does not name a port of Service %s at /metrics", job, eps, job)
		}
	}
}

func TestNetworkPoliciesDenyByDefaultAndOpenOnlyWhatIsServed(t *testing.T) {
	objs := render(t)
	deny := find(t, objs, "NetworkPolicy", "default-deny-ingress")
	if len(strMap(deny, "spec", "podSelector")) != 0 || len(list(deny, "spec", "ingress")) != 0 ||
		!slices.Contains(list(deny, "spec", "policyTypes"), any("Ingress")) {
		t.Error("default-deny-ingress does not deny all ingress to every pod")
	}
	grpcPol := find(t, objs, "NetworkPolicy", "clawguard-server-grpc")
	serverLabels := strMap(find(t, objs, "Deployment", "clawguard-server"), "spec", "template", "metadata", "labels")
	if !selects(strMap(grpcPol, "spec", "podSelector", "matchLabels"), serverLabels) {
		t.Error("clawguard-server-grpc does not select the server pods")
	}
	var ports []string
	for _, rule := range list(grpcPol, "spec", "ingress") {
		for _, p := range list(rule, "ports") {
			ports = append(ports, fmt.Sprint(get(p, "port")))
		}
	}
	if !slices.Equal(ports, []string{"7443"}) {
		t.Errorf("clawguard-server-grpc opens ports %v, want only 7443", ports)
	}
	metricsPol := find(t, objs, "NetworkPolicy", "clawguard-metrics")
	for _, rule := range list(metricsPol, "spec", "ingress") {
		if len(list(rule, "from")) == 0 {
			t.Error("clawguard-metrics opens /metrics to every source")
		}
	}
}

// TestContainersDropPrivileges: no container may escalate or keep capabilities.
func TestContainersDropPrivileges(t *testing.T) {
	for _, o := range render(t) {
		for _, c := range containers(o) {
			if get(c, "securityContext", "allowPrivilegeEscalation") != false ||
				get(c, "securityContext", "readOnlyRootFilesystem") != true ||
				!slices.Contains(list(c, "securityContext", "capabilities", "drop"), any("ALL")) {
				t.Errorf("%s/%s container %s does not drop privileges", o.Kind(), o.Name(), str(c, "name"))
			}
		}
	}
}
