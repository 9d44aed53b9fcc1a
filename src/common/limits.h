/* Buffer sizes for Kubernetes names, each tied to the API limit it comes from
 * (k8s.io/apimachinery/pkg/util/validation), so a fixed buffer never silently
 * cuts a valid name and an over-long one is refused where it enters. Every size
 * counts the terminating NUL. */
#ifndef TROUPE_COMMON_LIMITS_H
#define TROUPE_COMMON_LIMITS_H

/* A namespace is a DNS-1123 label: at most 63 characters. */
#define K8S_NAMESPACE_MAX 63
#define K8S_NAMESPACE_BUF (K8S_NAMESPACE_MAX + 1)

/* Node, pod and PodGroup names, label values aside, are DNS-1123 subdomains:
 * at most 253 characters. Queue names and pod-group names use the same size. */
#define K8S_NAME_MAX 253
#define K8S_NAME_BUF (K8S_NAME_MAX + 1)

/* metadata.uid: the API server writes a 36-character UUID; troupe accepts up
 * to 128 (the snapshot loader and tests use readable ones) and refuses more. */
#define K8S_UID_MAX 128
#define K8S_UID_BUF (K8S_UID_MAX + 1)

/* "namespace/name": 63 + '/' + 253 + NUL = 318, rounded up. */
#define K8S_KEY_BUF 320

/* A gang reservation's key: a "namespace/name" key and a suffix naming the
 * plan generation and member slot ("#g12/s3"), with room to spare. */
#define TROUPE_RESERVATION_KEY_BUF (K8S_KEY_BUF + 80)

/* Nodes one request may name (NodeNames, Nodes.items, the candidate nodes
 * of a preemption); a request over it is refused (400). Kubernetes supports
 * 5,000 nodes per cluster (its scalability thresholds), the largest clusters
 * cloud vendors announce have 65,000 (GKE) and 100,000 (EKS) nodes, and
 * kube-scheduler names each node at most once, so no real request comes near
 * this; a filter over 100,000 names takes troupe some tens of milliseconds
 * (bench_verbs --unknown-names), so one request cannot hold a worker for
 * seconds. */
#define TROUPE_MAX_NODE_NAMES 100000

/* One human-readable line: a refusal reason, a failure, a note. Longer text
 * is cut (snprintf), never overrun. */
#define TROUPE_MESSAGE_BUF 400

#endif
