package device

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func bits(f float64) uint64 { return math.Float64bits(f) }
func f64(b uint64) float64  { return math.Float64frombits(b) }

// dirBackend stores files under a directory. Names may contain '/', which
// become subdirectories (the extent store fans egroups out over 256 dirs).
type dirBackend struct{ root string }

func newDirBackend(root string) (*dirBackend, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("device: create %s: %w", root, err)
	}
	return &dirBackend{root: root}, nil
}

func (b *dirBackend) path(name string) (string, error) {
	if name == "" || strings.Contains(name, "..") || filepath.IsAbs(name) {
		return "", fmt.Errorf("device: bad file name %q", name)
	}
	return filepath.Join(b.root, filepath.FromSlash(name)), nil
}

type osFile struct{ *os.File }

func (f osFile) size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (b *dirBackend) open(name string, create bool) (rawFile, error) {
	p, err := b.path(name)
	if err != nil {
		return nil, err
	}
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_TRUNC
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(p, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	if create {
		// A new file's directory entry must be durable before the file's
		// first acknowledged write; syncing the parent here makes every
		// later fsync of the file sufficient.
		if d, err := os.Open(filepath.Dir(p)); err == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return osFile{f}, nil
}

func (b *dirBackend) remove(name string) error {
	p, err := b.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", name, ErrNotExist)
	} else if err != nil {
		return err
	}
	return nil
}

func (b *dirBackend) walk(fn func(rel string, info fs.FileInfo)) error {
	return filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the directory was read
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.root, p)
		fn(filepath.ToSlash(rel), info)
		return nil
	})
}

func (b *dirBackend) list() ([]string, error) {
	var out []string
	err := b.walk(func(rel string, _ fs.FileInfo) { out = append(out, rel) })
	sort.Strings(out)
	return out, err
}

func (b *dirBackend) listInfo() ([]FileInfo, error) {
	var out []FileInfo
	err := b.walk(func(rel string, info fs.FileInfo) {
		out = append(out, FileInfo{Name: rel, Size: info.Size(), ModTime: info.ModTime()})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (b *dirBackend) stat(name string) (FileInfo, error) {
	p, err := b.path(name)
	if err != nil {
		return FileInfo{}, err
	}
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return FileInfo{}, fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Name: name, Size: info.Size(), ModTime: info.ModTime()}, nil
}

func (b *dirBackend) usedBytes() (int64, error) {
	var n int64
	err := b.walk(func(_ string, info fs.FileInfo) { n += info.Size() })
	return n, err
}

// memBackend keeps files in RAM. It is volatile by design: a restart loses
// every replica on it, and recovery treats them as missing.
type memBackend struct {
	mu    sync.Mutex
	files map[string]*memData
}

type memData struct {
	mu  sync.RWMutex
	buf []byte
	// mtime is the last creation, write or truncation (unix ns).
	mtime atomic.Int64
}

func (d *memData) touch() { d.mtime.Store(time.Now().UnixNano()) }

func (d *memData) info(name string) FileInfo {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return FileInfo{Name: name, Size: int64(len(d.buf)), ModTime: time.Unix(0, d.mtime.Load())}
}

func newMemBackend() *memBackend { return &memBackend{files: map[string]*memData{}} }

type memFile struct{ d *memData }

func (b *memBackend) open(name string, create bool) (rawFile, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.files[name]
	if !ok || create {
		if !create {
			return nil, fmt.Errorf("%s: %w", name, ErrNotExist)
		}
		d = &memData{}
		d.touch()
		b.files[name] = d
	}
	return memFile{d}, nil
}

func (b *memBackend) remove(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.files[name]; !ok {
		return fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	delete(b.files, name)
	return nil
}

func (b *memBackend) list() ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.files))
	for n := range b.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (b *memBackend) listInfo() ([]FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]FileInfo, 0, len(b.files))
	for n, d := range b.files {
		out = append(out, d.info(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (b *memBackend) stat(name string) (FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.files[name]
	if !ok {
		return FileInfo{}, fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	return d.info(name), nil
}

func (b *memBackend) usedBytes() (int64, error) { return 0, nil }

func (f memFile) ReadAt(p []byte, off int64) (int, error) {
	f.d.mu.RLock()
	defer f.d.mu.RUnlock()
	if off >= int64(len(f.d.buf)) {
		return 0, io.EOF
	}
	n := copy(p, f.d.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f memFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	end := off + int64(len(p))
	if end > int64(len(f.d.buf)) {
		if end > int64(cap(f.d.buf)) {
			nb := make([]byte, end, max(end, 2*int64(cap(f.d.buf))))
			copy(nb, f.d.buf)
			f.d.buf = nb
		}
		f.d.buf = f.d.buf[:end]
	}
	copy(f.d.buf[off:], p)
	if len(p) > 0 {
		f.d.touch()
	}
	return len(p), nil
}

func (f memFile) Sync() error  { return nil }
func (f memFile) Close() error { return nil }

func (f memFile) Truncate(size int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	f.d.touch()
	if size <= int64(len(f.d.buf)) {
		f.d.buf = f.d.buf[:size]
		return nil
	}
	nb := make([]byte, size)
	copy(nb, f.d.buf)
	f.d.buf = nb
	return nil
}

func (f memFile) size() (int64, error) {
	f.d.mu.RLock()
	defer f.d.mu.RUnlock()
	return int64(len(f.d.buf)), nil
}
