package fsmonitor

import "golang.org/x/sys/unix"

// Disabled is why the daemon answers "/" for good ("" if it does not).
func (d *Daemon) Disabled() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.disabled
}

// Close stops watching (the daemon itself runs for the container's life).
func (d *Daemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return unix.Close(d.fd)
}
