package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/store"
)

// wakeFileSuffix is appended to the database file's path to name the wake-up file:
// every release or handover by a store on that database appends a line
// "table version key" to it, and the stores of other processes watch it (inotify,
// kqueue, ReadDirectoryChangesW through fsnotify) to wake their followers.
const wakeFileSuffix = "-casleader"

// wakeMaxSize is the size above which a writer truncates the wake-up file before
// appending: readers that find it shorter than what they read start over.
const wakeMaxSize = 64 << 10

// fileWake announces releases in the wake-up file next to the database file and
// watches it for those of other processes. It is the listener of a [Store] on a
// database file (not on an in-memory database).
type fileWake struct {
	db    *sql.DB
	table string
	hub   *notify.Hub
	mu    sync.Mutex // serialises this process's appends

	once sync.Once
	path string // the wake-up file; "" for an in-memory database

	listening atomic.Bool // the watch is set up
}

// Observed does nothing: the file carries every release.
func (w *fileWake) Observed(string, store.Record) {}

// Leading does nothing: releases are announced by Announce.
func (w *fileWake) Leading(string, int64, bool) {}

// Listening reports whether the wake-up file is being watched.
func (w *fileWake) Listening() bool { return w.listening.Load() }

// file returns the wake-up file's path, found on first use, "" when there is none.
func (w *fileWake) file() string {
	w.once.Do(func() {
		if f := databaseFile(w.db); f != "" {
			w.path = f + wakeFileSuffix
		}
	})
	return w.path
}

// databaseFile returns the path of db's main database file, "" for an in-memory or
// temporary database (or when it cannot be found: then only this process is woken).
func databaseFile(db *sql.DB) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `PRAGMA database_list`)
	if err != nil {
		return ""
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if rows.Scan(&seq, &name, &file) == nil && name == "main" {
			return file
		}
	}
	return ""
}

// Announce appends the release of key at version (0: not known) to the wake-up
// file. A failure only costs other processes' followers a poll.
func (w *fileWake) Announce(key string, version int64) {
	w.appendLine(sqlstore.NotifyPayload(w.table, version, key))
}

// AnnounceHandover appends the handover of key to candidate to to the wake-up file,
// in the form of PostgreSQL's notification ([sqlstore.HandoverPayload]).
func (w *fileWake) AnnounceHandover(key, to string) {
	w.appendLine(sqlstore.HandoverPayload(w.table, to, key))
}

func (w *fileWake) appendLine(line string) {
	path := w.file()
	if path == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if fi, err := os.Stat(path); err == nil && fi.Size() > wakeMaxSize {
		_ = os.Truncate(path, 0)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line + "\n")
	_ = f.Close()
}

// Run watches the wake-up file until ctx ends, and returns nil then. When the
// watch cannot be set up it retries with backoff; followers poll meanwhile. On an
// in-memory database it does nothing: only this process uses it.
func (w *fileWake) Run(ctx context.Context) error {
	if w.file() == "" {
		<-ctx.Done()
		return nil
	}
	for failures := 0; ctx.Err() == nil; {
		if err := w.watch(ctx); err != nil && ctx.Err() == nil {
			failures++
			_ = retry.Sleep(ctx, retry.Backoff(failures, 100*time.Millisecond, 30*time.Second))
			continue
		}
		failures = 0
	}
	return nil
}

// watch watches the file until ctx ends or the watch fails.
func (w *fileWake) watch(ctx context.Context) error {
	f, err := os.OpenFile(w.path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	if err := watcher.Add(w.path); err != nil {
		return err
	}
	offset, err := f.Seek(0, io.SeekEnd) // earlier releases are over
	if err != nil {
		return err
	}
	w.hub.WakeAll() // releases may have been missed before the watch
	w.listening.Store(true)
	defer w.listening.Store(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watcher.Errors:
			return err
		case ev, ok := <-watcher.Events:
			if !ok {
				return errors.New("sqlite: the wake-up file watch ended")
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				w.hub.WakeAll()
				return nil // watch the new file
			}
			if offset, err = w.read(f, offset); err != nil {
				return err
			}
		}
	}
}

// read handles the complete lines appended to f after offset and returns the
// offset after them. A file shorter than offset was truncated: it is read from
// the start, and everybody is woken (lines may have been lost).
func (w *fileWake) read(f *os.File, offset int64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return offset, err
	}
	if fi.Size() < offset {
		offset = 0
		w.hub.WakeAll()
	}
	if fi.Size() == offset {
		return offset, nil
	}
	buf := make([]byte, fi.Size()-offset)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return offset, err
	}
	buf = buf[:n]
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		return offset, nil // a line being written
	}
	sc := bufio.NewScanner(bytes.NewReader(buf[:end+1]))
	for sc.Scan() {
		if p, ok := sqlstore.ParseNotifyPayload(w.table, sc.Text()); ok {
			p.Wake(w.hub)
		}
	}
	return offset + int64(end) + 1, nil
}
