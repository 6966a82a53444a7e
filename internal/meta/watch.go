package meta

import (
	"bytes"
	"context"
	"sync"
)

// watchBuffer is how many events a slow watcher may lag before its channel
// is closed. Watchers drive caches that can always re-read, so dropping a
// laggard is safe while blocking commits would not be.
const watchBuffer = 1024

type watcher struct {
	prefix []byte
	ch     chan Event
	once   sync.Once
}

func (w *watcher) close() { w.once.Do(func() { close(w.ch) }) }

// Watch implements KV.
func (p *Pebble) Watch(ctx context.Context, prefix []byte) <-chan Event {
	w := &watcher{prefix: append([]byte(nil), prefix...), ch: make(chan Event, watchBuffer)}
	p.watchMu.Lock()
	p.watchers[w] = struct{}{}
	p.watchMu.Unlock()
	go func() {
		<-ctx.Done()
		p.watchMu.Lock()
		delete(p.watchers, w)
		p.watchMu.Unlock()
		w.close()
	}()
	return w.ch
}

func (p *Pebble) notify(t *Txn, rev int64) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
next:
	for w := range p.watchers {
		for _, op := range t.Ops {
			if !bytes.HasPrefix(op.Key, w.prefix) {
				continue
			}
			ev := Event{Type: EventPut, Item: Item{Key: op.Key, Value: op.Value, ModRev: rev}}
			if op.Delete {
				ev.Type = EventDelete
			}
			select {
			case w.ch <- ev:
			default:
				delete(p.watchers, w)
				w.close()
				continue next
			}
		}
	}
}
