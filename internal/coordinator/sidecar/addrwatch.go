package sidecar

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// addrChanges tells when an address of the host (this network namespace)
// is added or removed: the kernel's route netlink notifications for IPv4
// and IPv6 addresses, so that netd learns a new host address at once
// instead of at the next poll. Until it knows, an answer of an allowed
// name pointing at that address would be opened, and through slirp4netns
// it reaches the host's own services (docs/SECURITY.md, "Network").
type addrChanges struct {
	f *os.File
	C <-chan struct{} // one pending signal at most; closed when the watch ends
}

// watchAddrChanges subscribes to the namespace's address notifications.
// The caller compares the addresses itself on each signal (a message
// says only that something changed) and calls Close.
func watchAddrChanges() (*addrChanges, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	// Non-blocking, so reads wait in Go's poller and Close ends them.
	f := os.NewFile(uintptr(fd), "netlink-route")
	c := make(chan struct{}, 1)
	go func() {
		defer close(c)
		buf := make([]byte, 64*1024)
		for {
			_, err := f.Read(buf)
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				return // closed; ENOBUFS: messages were lost, which is a change too
			}
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}()
	return &addrChanges{f: f, C: c}, nil
}

// Close ends the subscription.
func (a *addrChanges) Close() error { return a.f.Close() }
