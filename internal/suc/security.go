package suc

import (
	corev1 "k8s.io/api/core/v1"
)

// UpgradeContext is the securityContext of the upgrade container. Without
// one, system-upgrade-controller runs it privileged (and adds
// CAP_SYS_BOOT). chart-upgrader needs none of that: it talks to the API
// server and writes its journal and lock file under /host. So: not
// privileged, no privilege escalation, every capability dropped, a
// read-only root file system (chart-upgrader writes nowhere in the
// image), the runtime's default seccomp profile, and the user uid:gid —
// non-root unless uid is 0.
//
// With uid 0 and no capabilities, the process can still write every
// root-owned file of the host that its owner may write (no
// CAP_DAC_OVERRIDE is needed when the owner matches) and signal the host's
// root processes (the Job shares the host's PID namespace): hence the
// non-root default, whose directories PrepareContext's container makes.
func UpgradeContext(uid, gid int) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsUser:                ptr(int64(uid)),
		RunAsGroup:               ptr(int64(gid)),
		RunAsNonRoot:             ptr(uid != 0),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// PrepareContext is the securityContext of the prepare container, which
// runs `chart-upgrader host prepare` (PrepareArgs) before the upgrade:
// root, to create directories in the host's root-owned /var/lib and /run,
// with CAP_CHOWN alone, to give them to the upgrade's user. Otherwise as
// UpgradeContext. A prepare container without a securityContext would get
// the runtime's default capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, …).
func PrepareContext() *corev1.SecurityContext {
	c := UpgradeContext(0, 0)
	c.Capabilities.Add = []corev1.Capability{"CHOWN"}
	return c
}

func ptr[T any](v T) *T { return &v }
