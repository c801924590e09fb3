// Package deployments holds no code: it is the home of the deployment files
// (NATS server configurations, JetStream definitions, the container image,
// Compose and Kubernetes manifests) and of the tests that keep them true
// to the worker: the NATS configurations start and enforce the permissions
// the worker and a gateway need, the JetStream definitions match what the
// worker creates, and every manifest parses and names the right things.
package deployments
