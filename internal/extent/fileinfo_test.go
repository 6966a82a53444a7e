package extent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
)

// ListInfo and Stat give each replica file's size and modification time:
// the filesystem's on a directory device, the last write on a mem device.
func TestListInfoAndStat(t *testing.T) {
	dir, root := dirStore(t, 1<<20)
	for name, st := range map[string]*Store{"dir": dir, "mem": memStore(t, 1<<20)} {
		t.Run(name, func(t *testing.T) {
			start := time.Now().Add(-time.Second)
			for _, id := range []uint64{7, 0x1ff} {
				if err := st.Create(id); err != nil {
					t.Fatal(err)
				}
				if err := st.Append(id, 0, make([]byte, id)); err != nil {
					t.Fatal(err)
				}
			}
			infos, err := st.ListInfo()
			if err != nil || len(infos) != 2 {
				t.Fatalf("ListInfo: %v %v", infos, err)
			}
			for _, fi := range infos {
				if fi.Size != int64(fi.ID) || fi.ModTime.Before(start) {
					t.Errorf("file %+v: want size %d, modified since %s", fi, fi.ID, start)
				}
				got, err := st.Stat(fi.ID)
				if err != nil || got.Size != fi.Size || !got.ModTime.Equal(fi.ModTime) {
					t.Errorf("Stat(%d) = %+v %v, want %+v", fi.ID, got, err, fi)
				}
			}
			if _, err := st.Stat(99); !errors.Is(err, device.ErrNotExist) {
				t.Errorf("Stat of a missing file: %v, want ErrNotExist", err)
			}
			if st == dir {
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(filepath.Join(root, FileName(7)), old, old); err != nil {
					t.Fatal(err)
				}
				if fi, _ := st.Stat(7); !fi.ModTime.Equal(old) {
					t.Errorf("mtime %s after Chtimes, want %s", fi.ModTime, old)
				}
			}
		})
	}
}
