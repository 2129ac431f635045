// Package deploy holds no code: its tests check the deployment files of the repository
// (compose.yaml at the root, k8s/*.yaml, grafana/, prometheus/) with the loaders of the
// Compose specification and the Kubernetes API types. It is a module of its own so that
// those dependencies stay out of pgimageai's go.mod; scripts/test runs its tests.
package deploy
