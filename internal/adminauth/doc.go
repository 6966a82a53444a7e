// Package adminauth authenticates requests to a node's admin API with AWS
// Signature Version 4, the scheme S3 clients already use (MinIO's admin
// API does the same): the CLI, the dev-cluster tooling and tests sign each
// request with an admin's access and secret key; the server recomputes the
// signature over the headers the client says it signed and compares.
//
// # What it owns
//
//   - Verifier: an http.Handler middleware that refuses unsigned (401),
//     wrongly signed, expired or non-admin (403) requests and logs each
//     refusal with the remote address and reason (never a secret). Paths
//     an operator chose to leave open (metrics, health) pass unsigned.
//   - Transport and Sign: the client side, for every Go caller of the
//     admin API.
//   - Keyring: where secrets come from (the root account from the node's
//     configuration; admin users from the IAM store once they exist).
//
// # What it must not do
//
// No credential storage and no user management: a Keyring is handed in.
// No TLS: confidentiality is the listener's job (--tls-cert); a signature
// only proves who sent the request and that its signed parts are intact.
//
// Signing and canonicalisation are aws-sdk-go-v2's v4 signer (already a
// dependency through the S3 benchmark client), so the canonical request is
// exactly AWS's; this package only chooses what to sign and compares.
package adminauth
