package deploy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestKubernetesPodsHoldNoToken: neither the bridge's pods nor the migrate
// Job's mount a service account token; pgimageai never calls the
// Kubernetes API, and a token is what a caller in the pod would take.
func TestKubernetesPodsHoldNoToken(t *testing.T) {
	m := loadManifests(t)
	for _, tt := range []struct {
		name string
		spec corev1.PodSpec
	}{
		{"deployment " + m.deployments[0].Name, m.deployments[0].Spec.Template.Spec},
		{"job " + m.jobs[0].Name, m.jobs[0].Spec.Template.Spec},
	} {
		if a := tt.spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: automountServiceAccountToken %v, want false", tt.name, a)
		}
	}
}

// TestKubernetesKeyEnvAllow: the bridge names exactly the key variables it
// takes from the Secret in PGIMAGEAI_KEY_ENV_ALLOW — no glob, nothing else —
// so that a models row cannot name another variable of the pod.
func TestKubernetesKeyEnvAllow(t *testing.T) {
	m := loadManifests(t)
	c := m.deployments[0].Spec.Template.Spec.Containers[0]
	var allow *corev1.EnvVar
	var keys []string
	for i, e := range c.Env {
		switch {
		case e.Name == "PGIMAGEAI_KEY_ENV_ALLOW":
			allow = &c.Env[i]
		case strings.HasSuffix(e.Name, "_API_KEY") && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			keys = append(keys, e.Name)
		}
	}
	if allow == nil || allow.ValueFrom != nil {
		t.Fatalf("PGIMAGEAI_KEY_ENV_ALLOW %+v, want a literal value", allow)
	}
	var names []string
	for _, n := range strings.Split(allow.Value, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	slices.Sort(names)
	slices.Sort(keys)
	if len(keys) == 0 || !slices.Equal(names, keys) {
		t.Errorf("PGIMAGEAI_KEY_ENV_ALLOW = %q, want exactly the keys from the Secret %v", allow.Value, keys)
	}
}

// TestKubernetesNetworkPolicy: one NetworkPolicy selects the bridge's and the
// Job's pods for both directions; ingress is the metrics port alone; egress is
// DNS to kube-dns, PostgreSQL, and HTTPS to public addresses only (never the
// metadata service or a private address, where the Kubernetes API is); no
// rule opens every port.
func TestKubernetesNetworkPolicy(t *testing.T) {
	m := loadManifests(t)
	if len(m.netpols) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(m.netpols))
	}
	np := m.netpols[0]
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() {
		t.Fatalf("podSelector %v (%v), want pgimageai's pods", np.Spec.PodSelector, err)
	}
	for _, l := range []map[string]string{m.deployments[0].Spec.Template.Labels, m.jobs[0].Spec.Template.Labels} {
		if !sel.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy does not select pods labelled %v", l)
		}
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}

	// Ingress: the metrics port, by name or number, and nothing else.
	var metricsPort int32
	for _, p := range m.deployments[0].Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 {
		t.Fatalf("ingress %+v, want one rule of one port", np.Spec.Ingress)
	}
	if p := np.Spec.Ingress[0].Ports[0]; p.Port == nil || (p.Port.String() != "metrics" && p.Port.IntValue() != int(metricsPort)) || protocol(p) != corev1.ProtocolTCP {
		t.Errorf("ingress port %+v, want the metrics port over TCP", p)
	}

	// Egress: every rule names its ports; together DNS, 5432 and 443.
	allowed := map[string][]networkingv1.NetworkPolicyPeer{}
	for i, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("egress rule %d names no port: it opens every port", i)
		}
		if len(r.To) == 0 {
			t.Errorf("egress rule %d names no peer: it reaches every address", i)
		}
		for _, p := range r.Ports {
			key := string(protocol(p)) + "/" + p.Port.String()
			allowed[key] = append(allowed[key], r.To...)
		}
	}
	var got []string
	for k := range allowed {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"TCP/443", "TCP/53", "TCP/5432", "UDP/53"}; !slices.Equal(got, want) {
		t.Errorf("egress ports %v, want %v", got, want)
	}
	for _, proto := range []string{"UDP/53", "TCP/53"} {
		for _, peer := range allowed[proto] {
			if peer.IPBlock != nil || peer.PodSelector == nil || peer.PodSelector.MatchLabels["k8s-app"] != "kube-dns" ||
				peer.NamespaceSelector == nil || peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" {
				t.Errorf("DNS (%s) reaches %+v, want kube-dns in kube-system only", proto, peer)
			}
		}
	}
	// HTTPS: public addresses only.
	for _, addr := range []string{"169.254.169.254", "10.96.0.1", "172.20.0.1", "192.168.1.1", "127.0.0.1", "100.64.0.1", "fd00:ec2::254", "fe80::1", "::1"} {
		if reaches(t, allowed["TCP/443"], addr) {
			t.Errorf("HTTPS reaches %s, a metadata, loopback or private address", addr)
		}
	}
	for _, addr := range []string{"162.159.140.245", "2606:4700::6810:84e5"} {
		if !reaches(t, allowed["TCP/443"], addr) {
			t.Errorf("HTTPS does not reach the public address %s (a provider's API)", addr)
		}
	}
}

func protocol(p networkingv1.NetworkPolicyPort) corev1.Protocol {
	if p.Protocol == nil {
		return corev1.ProtocolTCP // the API's default
	}
	return *p.Protocol
}

// reaches reports whether one of peers' ipBlocks holds addr outside its
// exceptions.
func reaches(t *testing.T, peers []networkingv1.NetworkPolicyPeer, addr string) bool {
	t.Helper()
	ip := netip.MustParseAddr(addr)
	for _, peer := range peers {
		if peer.IPBlock == nil {
			if peer.PodSelector == nil && peer.NamespaceSelector == nil {
				return true
			}
			continue
		}
		if !netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(ip) {
			continue
		}
		excepted := false
		for _, e := range peer.IPBlock.Except {
			excepted = excepted || netip.MustParsePrefix(e).Contains(ip)
		}
		if !excepted {
			return true
		}
	}
	return false
}
