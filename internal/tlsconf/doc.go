// Package tlsconf builds the TLS configurations of a node's listeners and
// clients from PEM files, and generates a throw-away certificate authority
// with node certificates for local clusters (terrace dev cluster --tls).
//
// # What it owns
//
//   - Files: the node's certificate and key (--tls-cert, --tls-key), used
//     by every listener (S3, admin API, replica RPC, etcd) and, in a
//     cluster, as the node's client certificate towards its peers; the
//     cluster CA (--tls-ca) that peers' certificates must chain to.
//   - Mutual TLS between nodes: node-to-node RPC and etcd peer and client
//     traffic require a client certificate from the cluster CA. The S3
//     and admin listeners do not ask clients for certificates (their
//     requests are signed with SigV4 instead).
//   - Dev CAs: ECDSA P-256 keys, certificates valid for one year, SANs for
//     loopback; never meant for production (operators bring their own CA).
//
// # What it must not do
//
// No listening, dialing or reloading: callers hand the configurations to
// net/http, gRPC, etcd and versitygw. Only the standard library is used.
package tlsconf
