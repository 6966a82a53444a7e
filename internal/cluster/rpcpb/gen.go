package rpcpb

// Regenerate after editing replica.proto (protoc from Debian's
// protobuf-compiler; the Go plugins at the versions recorded in the
// generated headers):
//
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative replica.proto
