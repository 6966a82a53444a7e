package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/terrace-storage/terrace/internal/s3"
	"github.com/terrace-storage/terrace/internal/server"
)

func init() {
	s3Starter = func(ctx context.Context, n *server.Node) error {
		spool := filepath.Join(n.Config.DataDir, "spool")
		if err := os.MkdirAll(spool, 0o700); err != nil {
			return err
		}
		be := s3.NewBackend(n.Layer, s3.BackendOptions{Logger: n.Log.With("component", "s3"), Keys: n.Keys, SpoolDir: spool,
			MaxSpoolBytes: n.Config.S3SpoolMaxBytes})
		n.Log.Info("S3 gateway listening", "address", n.Config.S3Address)
		return s3.Serve(ctx, be, s3.ServeConfig{
			Address: n.Config.S3Address, RootUser: n.Config.RootUser, RootPassword: n.Config.RootPassword, Region: n.Config.Region,
			CertFile: n.Config.TLSCert, KeyFile: n.Config.TLSKey,
			IAM: s3.NewStoreIAM(n.Users, n.Config.RootUser),
		})
	}
}
