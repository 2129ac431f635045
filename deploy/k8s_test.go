package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// manifests holds every object of k8s/*.yaml, decoded strictly into its API type.
type manifests struct {
	deployments     []*appsv1.Deployment
	jobs            []*batchv1.Job
	secrets         []*corev1.Secret
	services        []*corev1.Service
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	netpols         []*networkingv1.NetworkPolicy
}

// newObject returns the Go type of apiVersion and kind, and where to keep it.
func (m *manifests) newObject(apiVersion, kind string) (any, func(), error) {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		o := &appsv1.Deployment{}
		return o, func() { m.deployments = append(m.deployments, o) }, nil
	case "batch/v1/Job":
		o := &batchv1.Job{}
		return o, func() { m.jobs = append(m.jobs, o) }, nil
	case "v1/Secret":
		o := &corev1.Secret{}
		return o, func() { m.secrets = append(m.secrets, o) }, nil
	case "v1/Service":
		o := &corev1.Service{}
		return o, func() { m.services = append(m.services, o) }, nil
	case "policy/v1/PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		return o, func() { m.pdbs = append(m.pdbs, o) }, nil
	case "networking.k8s.io/v1/NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		return o, func() { m.netpols = append(m.netpols, o) }, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		o := &monitoringv1.ServiceMonitor{}
		return o, func() { m.serviceMonitors = append(m.serviceMonitors, o) }, nil
	}
	return nil, nil, fmt.Errorf("no API type known for %s %s", apiVersion, kind)
}

// loadManifests decodes every document of k8s/*.yaml. Unknown fields, duplicate keys and
// kinds without a known type are errors.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/ (%v)", err)
	}
	m := &manifests{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" { // Kustomize's, not an API object: TestKustomization
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			obj, keep, err := m.newObject(tm.APIVersion, tm.Kind)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, tm.Kind, err)
			}
			keep()
		}
	}
	return m
}

// TestStrictDecodeRejectsUnknownFields shows that the decoding of loadManifests fails on
// a misspelt field, so that a typo in a manifest cannot pass.
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	if len(m.deployments) != 1 || len(m.pdbs) != 1 || len(m.services) != 1 || len(m.serviceMonitors) != 1 || len(m.secrets) != 1 || len(m.jobs) != 1 {
		t.Fatalf("want one each of Deployment, PodDisruptionBudget, Service, ServiceMonitor, Secret, Job; got %d %d %d %d %d %d",
			len(m.deployments), len(m.pdbs), len(m.services), len(m.serviceMonitors), len(m.secrets), len(m.jobs))
	}
	d, pdb, svc, sm, secret, job := m.deployments[0], m.pdbs[0], m.services[0], m.serviceMonitors[0], m.secrets[0], m.jobs[0]
	pod := d.Spec.Template

	// Leader and standby: two replicas, and a rollout that never leaves fewer ready.
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2 (leader and standby)", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v, want maxUnavailable 0", ru)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Fatalf("the Deployment's selector %v does not match its pods' labels %v (%v)", d.Spec.Selector, pod.Labels, err)
	}

	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}

	// The metrics port: what pgimageai listens on, what the probes and the Service use.
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			port = &c.Ports[i]
		}
	}
	if port == nil {
		t.Fatal("no container port named metrics")
	}
	if got, want := env["PGIMAGEAI_METRICS_ADDR"].Value, fmt.Sprintf(":%d", port.ContainerPort); got != want {
		t.Errorf("PGIMAGEAI_METRICS_ADDR %q, want %q (the metrics port)", got, want)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/livez"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v, want an HTTP GET", p.name, p.probe)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || (g.Port.String() != "metrics" && g.Port.IntValue() != int(port.ContainerPort)) {
			t.Errorf("%s probe GET %s on %s, want %s on the metrics port", p.name, g.Path, g.Port.String(), p.path)
		}
	}

	// Keys only from the Secret, which has them.
	for _, name := range []string{"PGIMAGEAI_DSN", "OPENAI_API_KEY"} {
		e, ok := env[name]
		if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: %+v, want it from a Secret", name, e)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if _, has := secret.StringData[ref.Key]; ref.Name != secret.Name || !has {
			t.Errorf("%s refers to secret %s key %s, which secret.yaml does not hold", name, ref.Name, ref.Key)
		}
	}
	for _, e := range c.Env {
		if e.Name == "PGIMAGEAI_KEY_ENV_ALLOW" { // names of variables, not a secret
			continue
		}
		if strings.Contains(e.Name, "KEY") || strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "DSN") {
			if e.Value != "" {
				t.Errorf("%s has a literal value in the Deployment; take it from the Secret", e.Name)
			}
		}
	}

	// Memory: GOMEMLIMIT = byte budget + the binary's headroom; the limit a quarter above
	// GOMEMLIMIT (a soft limit), and the request equal to the limit (no overcommit).
	budget := mustSize(t, env["PGIMAGEAI_BYTE_BUDGET"].Value)
	gomem := mustSize(t, env["GOMEMLIMIT"].Value)
	if gomem != budget+headroom {
		t.Errorf("GOMEMLIMIT %d, want the byte budget %d + %d", gomem, budget, headroom)
	}
	limit, request := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Requests[corev1.ResourceMemory]
	if limit.Value() < gomem+gomem/4 {
		t.Errorf("memory limit %s below GOMEMLIMIT %d + a quarter", limit.String(), gomem)
	}
	if request.Cmp(limit) != 0 {
		t.Errorf("memory request %s, want the limit %s", request.String(), limit.String())
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit throttles provider calls and keepalives; set only a request")
	}

	// Non-root, read-only, and time for a graceful stop.
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod security context %+v, want runAsNonRoot with the image's user 65532", sc)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v, want a read-only root and no privilege escalation", sc)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want at least 30 for a graceful stop", g)
	}

	// The PodDisruptionBudget keeps one of the two.
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !psel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the pods (%v)", pdb.Spec.Selector, err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}

	// The Service selects the pods and names the metrics port; the ServiceMonitor selects
	// the Service and scrapes that port.
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service's selector %v does not select the pods", svc.Spec.Selector)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v, want the metrics port", svc.Spec.Ports)
	}
	smsel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || !smsel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not select the Service (%v)", sm.Spec.Selector, err)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port metrics", sm.Spec.Endpoints)
	}

	// The migrate Job runs the same image, with the DSN from the same Secret.
	jc := job.Spec.Template.Spec.Containers
	if len(jc) != 1 || jc[0].Image != c.Image || !slices.Equal(jc[0].Args, []string{"migrate"}) {
		t.Errorf("migrate Job containers %+v, want the Deployment's image %s running migrate", jc, c.Image)
	} else if e := jc[0].Env; len(e) != 1 || e[0].ValueFrom == nil || e[0].ValueFrom.SecretKeyRef == nil || e[0].ValueFrom.SecretKeyRef.Name != secret.Name {
		t.Errorf("migrate Job env %+v, want PGIMAGEAI_DSN from the Secret", e)
	}
}

// kustomization is the part of deploy/k8s/kustomization.yaml that pgimageai uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
	SecretGenerator []struct {
		Name    string   `json:"name"`
		Envs    []string `json:"envs"`
		Options struct {
			DisableNameSuffixHash bool `json:"disableNameSuffixHash"`
		} `json:"options"`
	} `json:"secretGenerator"`
}

// TestKustomization: the kustomization's inputs reach the manifests — its image
// entry names the image the Deployment and the Job use, its generated Secret is the
// one they refer to, with every key they read (keys.env.example) — and every
// resource it lists exists.
func TestKustomization(t *testing.T) {
	raw, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
		t.Fatalf("kind %q apiVersion %q", k.Kind, k.APIVersion)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
		if r == "secret.yaml" {
			t.Error("secret.yaml and the secretGenerator would both make Secret pgimageai")
		}
	}
	if !slices.Contains(k.Resources, "networkpolicy.yaml") {
		t.Error("the kustomization does not apply networkpolicy.yaml")
	}
	m := loadManifests(t)
	images := []string{m.deployments[0].Spec.Template.Spec.Containers[0].Image, m.jobs[0].Spec.Template.Spec.Containers[0].Image}
	if len(k.Images) != 1 || k.Images[0].NewName == "" || k.Images[0].NewTag == "" {
		t.Fatalf("images %+v, want one entry with newName and newTag", k.Images)
	}
	for _, img := range images {
		if name, _, _ := strings.Cut(img, ":"); name != k.Images[0].Name {
			t.Errorf("the manifests use image %s, the kustomization rewrites %s", img, k.Images[0].Name)
		}
	}
	if len(k.SecretGenerator) != 1 || k.SecretGenerator[0].Name != m.secrets[0].Name || !k.SecretGenerator[0].Options.DisableNameSuffixHash {
		t.Fatalf("secretGenerator %+v, want Secret %s without a hash suffix", k.SecretGenerator, m.secrets[0].Name)
	}
	example, err := os.ReadFile("k8s/keys.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for key := range m.secrets[0].StringData {
		if !strings.Contains(string(example), key+"=") {
			t.Errorf("keys.env.example lacks %s, which the manifests read", key)
		}
	}
}
