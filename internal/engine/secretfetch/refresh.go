package secretfetch

import (
	"context"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// Refresh runs each of sources that has a refresh period again every
// period until ctx ends, handing the new value of sources[i] to set. A
// failed fetch or set goes to failed (the error never holds the value)
// and the previous value stays until the next period. It returns when ctx
// is done and every source's loop has stopped.
func Refresh(ctx context.Context, sources []*config.Secret, set func(ctx context.Context, i int, value string) error, failed func(name string, err error)) {
	var wg sync.WaitGroup
	for i, src := range sources {
		if src == nil || src.Refresh <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(src.Refresh)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				v, err := Value(ctx, src)
				if err == nil {
					err = set(ctx, i, v)
				}
				if err != nil && ctx.Err() == nil {
					failed(src.Name, err)
				}
			}
		}()
	}
	wg.Wait()
}
