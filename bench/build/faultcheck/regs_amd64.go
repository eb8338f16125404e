package main

import "golang.org/x/sys/cpu"

// holdVectors is in regs_amd64.s.
//
//go:noescape
func holdVectors(in, out *[256]uint64, kin, kout *[8]uint64, mode, n uintptr)

// haveAVX512 says whether zmm0-31 and k0-7 exist (and the OS saves them).
func haveAVX512() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW }
