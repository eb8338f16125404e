//go:build !amd64

package main

func holdVectors(in, out *[256]uint64, kin, kout *[8]uint64, mode, n uintptr) {}

func haveAVX512() bool { return false }
