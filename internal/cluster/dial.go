package cluster

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DialPeer opens a replica-RPC connection to addr that authenticates every
// call as node self with the cluster secret, exactly as a peer's Router
// does. Operator tools and end-to-end tests use it (e.g. to show that a
// wrong secret is refused); nodes use the Router's pooled connections.
// The caller closes the connection.
func DialPeer(addr, self string, secret []byte) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(clientAuth(secret, self)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("cluster: dial peer %s: %w", addr, err)
	}
	return cc, nil
}
