package server

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/terrace-storage/terrace/internal/sse"
)

// MasterKeyFileName is the keyring a single node creates in its data
// directory when none is configured.
const MasterKeyFileName = "master.key"

// openKeys resolves the cluster master keyring, which seals SSE-S3 data
// keys and user secrets:
//
//  1. TERRACE_MASTER_KEY (keyring text: ID:BASE64KEY entries separated by
//     newlines or commas, the first active);
//  2. master_key_file / TERRACE_MASTER_KEY_FILE;
//  3. in cluster mode, a key derived from the cluster secret, which every
//     node has (a dedicated keyring file is better: it can be rotated
//     without changing the secret);
//  4. on a single node, <data_dir>/master.key, created on first start.
//
// Rotation: put a new line first in the keyring (keep the old lines),
// restart, run 'terrace sse rewrap', then drop the old lines.
func (n *Node) openKeys(getenv func(string) string) error {
	cfg := n.Config
	switch {
	case getenv("TERRACE_MASTER_KEY") != "":
		k, err := sse.ParseKeyring(strings.ReplaceAll(getenv("TERRACE_MASTER_KEY"), ",", "\n"))
		if err != nil {
			return fmt.Errorf("server: TERRACE_MASTER_KEY: %w", err)
		}
		n.Keys = k
		n.Log.Info("master keyring from environment", "keys", k.String())
	case cfg.MasterKeyFile != "":
		k, err := sse.LoadKeyringFile(cfg.MasterKeyFile)
		if err != nil {
			return fmt.Errorf("server: master key file: %w", err)
		}
		n.Keys = k
		n.Log.Info("master keyring loaded", "file", cfg.MasterKeyFile, "keys", k.String())
	case cfg.Clustered():
		k, err := sse.NewKeyring(sse.DeriveMasterKey("cluster-secret", cfg.ClusterSecret))
		if err != nil {
			return err
		}
		n.Keys = k
		n.Log.Warn("master key derived from the cluster secret; configure master_key_file to rotate it independently")
	default:
		p := filepath.Join(cfg.DataDir, MasterKeyFileName)
		k, err := sse.LoadKeyringFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			if k, err = sse.CreateKeyringFile(p, "local-1"); err == nil {
				n.Log.Warn("created a master keyring next to the metadata; keep a copy elsewhere (without it encrypted objects are lost) and consider moving it off this disk (master_key_file)", "file", p)
			}
		}
		if err != nil {
			return fmt.Errorf("server: master key: %w", err)
		}
		n.Keys = k
	}
	return nil
}
