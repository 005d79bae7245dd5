// Package secrets makes the files behind the Kubernetes deployment's Secrets (deploy/k8s/base): a
// throwaway CA, kas's certificate for the names agents, callers and other replicas dial, and random
// agent, caller, private-API and Redis secrets. It is for trying the deployment; bring your own CA and
// tokens for anything else (same file names).
//
// It never overwrites a file unless asked: regenerating tokens under a running deployment locks its
// agents out until they restart.
package secrets

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/pki"
)

// Files the kustomization's secretGenerator reads, in Options.Dir.
const (
	CACert        = "ca.crt"
	KasCert       = "kas.crt"
	KasKey        = "kas.key"
	AgentTokens   = "agent-tokens.txt"
	CallerTokens  = "caller-tokens.txt"
	AgentToken    = "agent-token"
	CallerToken   = "caller-token"
	PrivateSecret = "private-api-secret"
	RedisPassword = "redis-password"
)

// Defaults of Options.
const (
	// DefaultDir is where deploy/k8s/base/kustomization.yaml reads them, from the repository root.
	DefaultDir     = "deploy/k8s/base/secrets"
	DefaultNS      = "tunnelbench"
	DefaultAgentID = 1
	// DefaultValidity of the certificates: long enough for a trial, short enough not to become permanent.
	DefaultValidity = 90 * 24 * time.Hour
)

// Files lists every file Generate writes.
var Files = []string{CACert, KasCert, KasKey, AgentTokens, CallerTokens, AgentToken, CallerToken, PrivateSecret, RedisPassword}

// Options of Generate; zero fields take the defaults.
type Options struct {
	// Dir receives the files (DefaultDir, relative to the repository root).
	Dir string
	// Namespace the deployment runs in (DefaultNS): kas's certificate names its Services there too.
	Namespace string
	// KasService and PeerService are the names of kas's Service and of the headless Service that gives
	// each replica a DNS name (the manifests' "kas" and "kas-peers").
	KasService, PeerService string
	// AgentID is the id of the agent whose token the agentk pods share (DefaultAgentID).
	AgentID int64
	// Validity of the certificates (DefaultValidity).
	Validity time.Duration
	// Force overwrites existing files.
	Force bool
}

func (o Options) withDefaults() Options {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNS
	}
	if o.KasService == "" {
		o.KasService = "kas"
	}
	if o.PeerService == "" {
		o.PeerService = "kas-peers"
	}
	if o.AgentID == 0 {
		o.AgentID = DefaultAgentID
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	return o
}

// KasNames are the DNS names kas's certificate holds: its Service (as agents and callers in the
// namespace dial it, and fully qualified) and every replica behind the headless Service (as the
// replicas' --private-url names them), plus localhost for kubectl port-forward.
func (o Options) KasNames() []string {
	o = o.withDefaults()
	var names []string
	for _, n := range []string{o.KasService, "*." + o.PeerService} {
		names = append(names, n, n+"."+o.Namespace, n+"."+o.Namespace+".svc", n+"."+o.Namespace+".svc.cluster.local")
	}
	return append(names, "localhost")
}

// Generate writes every file of Files into o.Dir and returns their paths.
func Generate(o Options) ([]string, error) {
	o = o.withDefaults()
	if o.AgentID < 0 {
		return nil, fmt.Errorf("agent id %d must be positive", o.AgentID)
	}
	if o.Validity < 0 {
		return nil, fmt.Errorf("validity %s must be positive", o.Validity)
	}
	if !o.Force {
		var present []string
		for _, f := range Files {
			if _, err := os.Stat(filepath.Join(o.Dir, f)); err == nil {
				present = append(present, f)
			}
		}
		if len(present) > 0 {
			return nil, fmt.Errorf("%s already holds %v: a running deployment may use them; remove them or force", o.Dir, present)
		}
	}
	files, err := o.contents()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range Files {
		p := filepath.Join(o.Dir, f)
		if err := os.WriteFile(p, files[f], 0o600); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// contents makes every file in memory, so that a failure writes nothing.
func (o Options) contents() (map[string][]byte, error) {
	ca, err := pki.NewCA("tunnelbench "+o.Namespace+" CA", o.Validity)
	if err != nil {
		return nil, err
	}
	kasCert, kasKey, _, err := ca.Issue(pki.Leaf{CN: o.KasService, Usage: x509.ExtKeyUsageServerAuth,
		DNSNames: o.KasNames(), IPs: pki.Loopback, Validity: o.Validity})
	if err != nil {
		return nil, err
	}
	// rand.Text: 128 random bits in base32, no '=', space or quote, so that a token sits in an ID=TOKEN
	// line, a Redis config line and a shell word as it is.
	agentToken, callerToken := rand.Text(), rand.Text()
	return map[string][]byte{
		CACert:        ca.CertPEM,
		KasCert:       kasCert,
		KasKey:        kasKey,
		AgentTokens:   fmt.Appendf(nil, "# agent id = agent token (agentk's %s)\n%d=%s\n", AgentToken, o.AgentID, agentToken),
		CallerTokens:  fmt.Appendf(nil, "# agent ids = caller token (tunnelbench's %s): every agent\n*=%s\n", CallerToken, callerToken),
		AgentToken:    []byte(agentToken + "\n"),
		CallerToken:   []byte(callerToken + "\n"),
		PrivateSecret: []byte(rand.Text() + rand.Text() + "\n"),
		RedisPassword: []byte(rand.Text() + "\n"),
	}, nil
}
