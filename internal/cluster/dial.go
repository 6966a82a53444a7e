package cluster

import (
	"crypto/tls"
	"fmt"

	"google.golang.org/grpc"
)

// DialPeer opens a replica-RPC connection to addr that authenticates every
// call as node self with the cluster secret, exactly as a peer's Router
// does. Operator tools and end-to-end tests use it (e.g. to show that a
// wrong secret is refused); nodes use the Router's pooled connections.
// tc is the mutual-TLS client configuration of a TLS cluster (nil: plain
// text). The caller closes the connection.
func DialPeer(addr, self string, secret []byte, tc *tls.Config) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(addr,
		transportCredentials(tc),
		grpc.WithUnaryInterceptor(clientAuth(secret, self)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("cluster: dial peer %s: %w", addr, err)
	}
	return cc, nil
}
