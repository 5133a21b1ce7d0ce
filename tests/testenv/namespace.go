package testenv

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreateNamespace creates a namespace with a unique name starting with a
// DNS-safe form of prefix and returns that name. Only the workloads mode
// runs the namespace controller; otherwise a deleted namespace would stay
// Terminating: callers leave them; the data goes away with the environment.
func (e *Env) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: dnsPrefix(prefix) + "-"}}
	got, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating a namespace named %q…: %w", ns.GenerateName, err)
	}
	return got.Name, nil
}

// dnsPrefix turns s (say a test name) into a lowercase DNS label of at most
// 40 characters, leaving room for the generated suffix.
func dnsPrefix(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "test"
	}
	return out
}
