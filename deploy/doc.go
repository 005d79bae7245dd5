// Package deploy holds what runs tunnelbench beyond one machine: the container image (Dockerfile) and
// the Kubernetes manifests (k8s/base: kas replicas, Redis, agentk, a demo server; k8s/bench: tunnelbench
// as a Job). Its Go code only checks them, since no cluster is at hand: the manifests decode strictly
// into the Kubernetes API types, every container's arguments parse with the real kas, agentk and
// tunnelbench parsers, and ports, Services, Secrets and certificates agree with each other.
//
// Nothing here is imported by the tunnel or the harness.
package deploy
