package imagecheck

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/chart-upgrader/chart-upgrader/internal/registries"
)

// PullEach asks for img as the kubelet pulls it with the credentials of
// the pod's pull secrets that match img (credentials.lookup, in the
// kubelet's order): one pull per credential, each over every endpoint
// (Pull), until one finds it, as the kubelet hands containerd one
// credential per pull and takes the first that succeeds
// (kuberuntime's PullImage). With no credential it is one pull with
// registries.yaml's own. Tried holds every endpoint's answer of every
// pull, in order; with several credentials each answer says which one it
// got ("credential 2 of 3: …"), never the credential itself. Found, when
// some pull found img, is the last of Tried.
func (p *Puller) PullEach(ctx context.Context, img registries.Image, creds []authn.Authenticator) Pulled {
	if len(creds) == 0 {
		return p.Pull(ctx, img, nil)
	}
	out := Pulled{Image: img}
	for i, cred := range creds {
		pulled := p.Pull(ctx, img, cred)
		for _, a := range pulled.Tried {
			if len(creds) > 1 && !a.Found {
				a.Said = fmt.Sprintf("credential %d of %d: %s", i+1, len(creds), a.Said)
			}
			out.Tried = append(out.Tried, a)
		}
		if pulled.Found != nil {
			out.Found = &out.Tried[len(out.Tried)-1]
			break
		}
	}
	return out
}
