package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadWatch samples the 1-minute load average (Linux) every 5 s, to report how busy
// the machine was while the benchmark ran.
type loadWatch struct {
	mu   sync.Mutex
	vals []float64
	stop chan struct{}
}

func watchLoad() *loadWatch {
	w := &loadWatch{stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			if v, ok := loadavg(); ok {
				w.mu.Lock()
				w.vals = append(w.vals, v)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *loadWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.vals) == 0 {
		return "load average unknown"
	}
	s := summarize(w.vals)
	return fmt.Sprintf("1-minute load average during the run: min %.2f, median %.2f, max %.2f (%d samples)", s.Min, s.P50, s.Max, s.N)
}

func loadavg() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}
