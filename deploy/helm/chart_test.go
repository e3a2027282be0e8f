// Package helm holds the Helm chart (deploy/helm/clawguard); this test lints
// and renders it with Helm's own library (no helm binary) and checks it
// deploys what the kustomize base deploys, hardened the same way.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/clawguard/clawguard/deploy/internal/manifest"
)

const chartDir = "clawguard"

// The decoded objects and their readers (shared with the other deploy tests).
type obj = manifest.Obj

var (
	get  = manifest.Get
	str  = manifest.Str
	list = manifest.List
)

func decodeAll(t *testing.T, where string, r io.Reader) []obj {
	t.Helper()
	var out []obj
	dec := yaml.NewDecoder(r)
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if o != nil {
			out = append(out, obj(o))
		}
	}
}

// render renders the chart with these values over values.yaml.
func render(t *testing.T, values map[string]any) ([]obj, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{Name: "clawguard", Namespace: "clawguard", IsInstall: true}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var objs []obj
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue // NOTES.txt, helpers
		}
		objs = append(objs, decodeAll(t, n, strings.NewReader(files[n]))...)
	}
	return objs, nil
}

func mustRender(t *testing.T, values map[string]any) []obj {
	t.Helper()
	objs, err := render(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

// base is the kustomize base's objects, as written (namespace and images are
// the only things kustomize changes there, and neither is compared).
func base(t *testing.T) []obj {
	t.Helper()
	files, err := filepath.Glob("../k8s/base/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []obj
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decodeAll(t, f, bytes.NewReader(data))...)
	}
	return objs
}

func find(objs []obj, kind, name string) obj {
	for _, o := range objs {
		if o.Kind() == kind && o.Name() == name {
			return o
		}
	}
	return nil
}

func containers(o obj) []any { return list(o, "spec", "template", "spec", "containers") }

// comparable is an object's spec with what legitimately differs between the
// chart and the base removed: labels, images and pull policy.
func comparable(o obj) any {
	spec, _ := deepCopy(get(o, "spec")).(map[string]any)
	if tpl, ok := spec["template"].(map[string]any); ok {
		delete(tpl, "metadata")
		for _, c := range list(tpl, "spec", "containers") {
			delete(c.(map[string]any), "image")
			delete(c.(map[string]any), "imagePullPolicy")
		}
	}
	return spec
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// Issue 33: `helm lint` passes with no warning, with the defaults and with
// every optional part on.
func TestChartLints(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything on": everything()} {
		l := lint.RunAll(chartDir, vals, "clawguard")
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: lint: %v", name, m)
			}
		}
		if l.HighestSeverity >= support.WarningSev {
			t.Errorf("%s: lint's highest severity is %d", name, l.HighestSeverity)
		}
	}
}

// Issue 33: with its defaults the chart deploys what the kustomize base does
// — the same workloads, Services, budget, Job and policies with the same
// specs (probes, args, securityContext, volumes) — so the two stay one
// deployment described twice. Optional parts of the base (ServiceMonitors,
// PrometheusRule) are compared with them on.
func TestDefaultsMatchTheKustomizeBase(t *testing.T) {
	chart := mustRender(t, map[string]any{"monitoring": map[string]any{"serviceMonitors": true, "prometheusRule": true}})
	compared := 0
	for _, b := range base(t) {
		if b.Kind() == "Namespace" {
			continue // Helm installs into a namespace it is given
		}
		c := find(chart, b.Kind(), b.Name())
		if c == nil {
			t.Errorf("the chart has no %s %s", b.Kind(), b.Name())
			continue
		}
		compared++
		if got, want := comparable(c), comparable(b); !reflect.DeepEqual(got, want) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("%s %s differs from the base:\nchart:\n%s\nbase:\n%s", b.Kind(), b.Name(), g, w)
		}
	}
	if compared < 10 {
		t.Errorf("compared %d objects, want every object of the base", compared)
	}
	for _, c := range chart {
		if b := find(base(t), c.Kind(), c.Name()); b == nil {
			t.Errorf("the chart's defaults render %s %s, which the base does not have", c.Kind(), c.Name())
		}
	}
}

// The chart's copy of the generated PrometheusRule is the base's: one source
// (deploy/prometheus), generated once.
func TestPrometheusRuleIsTheBasesCopy(t *testing.T) {
	a, err := os.ReadFile("clawguard/files/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../k8s/base/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CLAWGUARD_UPDATE_PROMETHEUSRULE") == "1" {
		if err := os.WriteFile("clawguard/files/prometheusrule.yaml", b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(a, b) {
		t.Error("deploy/helm/clawguard/files/prometheusrule.yaml is not deploy/k8s/base/prometheusrule.yaml; CLAWGUARD_UPDATE_PROMETHEUSRULE=1 go test ./helm")
	}
}

func everything() map[string]any {
	return map[string]any{
		"server":     map[string]any{"replicas": 3, "console": map[string]any{"enabled": true}},
		"tls":        map[string]any{"enabled": true, "clientCA": true},
		"bridge":     map[string]any{"enabled": true, "kind": "slack"},
		"runner":     map[string]any{"agentImage": "clawguard-agent-demo:latest", "serverAddress": "clawguard.example:7443"},
		"monitoring": map[string]any{"serviceMonitors": true, "prometheusRule": true},
		"image":      map[string]any{"server": map[string]any{"repository": "registry.example/clawguard-server", "tag": "v1.2.3"}},
		"database":   map[string]any{"urlSecret": map[string]any{"name": "pg", "key": "dsn"}},
	}
}

func args(c any) []string {
	var out []string
	for _, a := range list(c, "args") {
		out = append(out, a.(string))
	}
	return out
}

func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Issue 33: the values an operator sets reach the objects: replicas, images,
// the database URL by reference, TLS (server certificate, client CA, probes
// that can reach a TLS server, runner and bridge client certificates), the
// console, a bridge and the runners' server address.
func TestValuesReachTheObjects(t *testing.T) {
	objs := mustRender(t, everything())
	srv := find(objs, "Deployment", "clawguard-server")
	if srv == nil {
		t.Fatal("no server Deployment")
	}
	if r, _ := get(srv, "spec", "replicas").(int); r != 3 {
		t.Errorf("replicas = %v, want 3", get(srv, "spec", "replicas"))
	}
	c := containers(srv)[0]
	if str(c, "image") != "registry.example/clawguard-server:v1.2.3" {
		t.Errorf("server image = %q", str(c, "image"))
	}
	a := args(c)
	for f, want := range map[string]string{"--tls-cert": "/var/run/clawguard/tls/tls.crt", "--tls-key": "/var/run/clawguard/tls/tls.key",
		"--tls-client-ca": "/var/run/clawguard/tls/ca.crt", "--console-listen": "0.0.0.0:8443"} {
		if flag(a, f) != want {
			t.Errorf("server %s = %q, want %q (args %v)", f, flag(a, f), want, a)
		}
	}
	env := list(c, "env")[0]
	if str(env, "valueFrom", "secretKeyRef", "name") != "pg" || str(env, "valueFrom", "secretKeyRef", "key") != "dsn" {
		t.Errorf("database URL is not taken from Secret pg/dsn: %v", env)
	}
	for _, p := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		if get(c, p, "grpc") != nil || str(c, p, "httpGet", "port") != "metrics" {
			t.Errorf("with TLS the server's %s must be HTTP on the metrics port: %v", p, get(c, p))
		}
	}
	if svc := find(objs, "Service", "clawguard-server"); !slices.ContainsFunc(list(svc, "spec", "ports"), func(p any) bool { return str(p, "name") == "console" }) {
		t.Error("the console port is not on the Service")
	}

	run := find(objs, "DaemonSet", "clawguard-runner")
	ra := args(containers(run)[0])
	for f, want := range map[string]string{"--server": "clawguard.example:7443", "--tls-ca": "/var/run/clawguard/tls/ca.crt",
		"--tls-cert": "/var/run/clawguard/tls/tls.crt", "--agent-image": "clawguard-agent-demo:latest"} {
		if flag(ra, f) != want {
			t.Errorf("runner %s = %q, want %q (args %v)", f, flag(ra, f), want, ra)
		}
	}

	br := find(objs, "Deployment", "clawguard-slack")
	if br == nil {
		t.Fatal("bridge.enabled with kind slack rendered no clawguard-slack Deployment")
	}
	bc := containers(br)[0]
	ba := args(bc)
	if str(bc, "image") != "clawguard-slack:dev" || flag(ba, "--slack-app-token-file") == "" || flag(ba, "--server") != "clawguard.example:7443" ||
		flag(ba, "--tls-cert") == "" {
		t.Errorf("bridge: image %q args %v", str(bc, "image"), ba)
	}
	if str(bc, "readinessProbe", "httpGet", "path") != "/readyz" || str(bc, "livenessProbe", "httpGet", "path") != "/healthz" {
		t.Errorf("bridge probes: %v %v", get(bc, "readinessProbe"), get(bc, "livenessProbe"))
	}
	rule := find(objs, "PrometheusRule", "clawguard")
	baseRule := find(base(t), "PrometheusRule", "clawguard")
	if rule == nil || !reflect.DeepEqual(get(rule, "spec"), get(baseRule, "spec")) {
		t.Error("the PrometheusRule's spec is not the base's")
	}
	for _, n := range []string{"clawguard-server", "clawguard-runner"} {
		if find(objs, "ServiceMonitor", n) == nil {
			t.Errorf("no ServiceMonitor %s", n)
		}
	}

	// Every container of every workload, with everything on, is hardened as
	// the base's are; pods that need not be root are not.
	for _, o := range objs {
		for _, c := range containers(o) {
			if get(c, "securityContext", "allowPrivilegeEscalation") != false ||
				get(c, "securityContext", "readOnlyRootFilesystem") != true ||
				!slices.Contains(list(c, "securityContext", "capabilities", "drop"), any("ALL")) {
				t.Errorf("%s/%s container %s does not drop privileges", o.Kind(), o.Name(), str(c, "name"))
			}
		}
		if len(containers(o)) > 0 && o.Name() != "clawguard-runner" && get(o, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s/%s does not run as non-root", o.Kind(), o.Name())
		}
		if len(containers(o)) > 0 && str(o, "spec", "template", "spec", "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("%s/%s has no RuntimeDefault seccomp profile", o.Kind(), o.Name())
		}
	}
}

// A value the chart cannot honour is refused at render, not deployed.
func TestUnknownBridgeKindIsRefused(t *testing.T) {
	_, err := render(t, map[string]any{"bridge": map[string]any{"enabled": true, "kind": "irc"}})
	if err == nil || !strings.Contains(err.Error(), "bridge.kind must be telegram or slack") {
		t.Fatalf("render with bridge.kind irc: %v, want a refusal", err)
	}
}

// Issue 45: the CloudNativePG example is a synchronous, failing-over
// cluster, and its values file points the servers and the migration at the
// operator's Secret (the -rw Service's DSN).
func TestCloudNativePGExample(t *testing.T) {
	f, err := os.Open("examples/cloudnativepg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs := decodeAll(t, "cloudnativepg.yaml", f)
	if len(objs) != 1 || objs[0]["kind"] != "Cluster" {
		t.Fatalf("cloudnativepg.yaml: %d objects, want one Cluster", len(objs))
	}
	spec := objs[0]["spec"].(map[string]any)
	syncCfg, _ := spec["postgresql"].(map[string]any)["synchronous"].(map[string]any)
	if n, _ := spec["instances"].(int); n < 2 || syncCfg["number"] != 1 || syncCfg["dataDurability"] != "required" {
		t.Fatalf("the cluster: instances %v, synchronous %v; want a standby every commit waits for", spec["instances"], syncCfg)
	}
	data, err := os.ReadFile("examples/values-cloudnativepg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatal(err)
	}
	rendered := mustRender(t, vals)
	for _, o := range []obj{find(rendered, "Deployment", "clawguard-server"), find(rendered, "Job", "clawguard-migrate")} {
		if o == nil {
			t.Fatal("the server Deployment or the migration Job is not rendered")
		}
		if s := fmt.Sprint(o); !strings.Contains(s, "clawguard-pg-app") || !strings.Contains(s, "key:uri") {
			t.Errorf("%v does not read the DSN from clawguard-pg-app/uri", o["metadata"])
		}
	}
}
