// SPDX-License-Identifier: MIT
// tests/hosts/gopreempt.go - a Go program for tests/cli-record-go.sh: 8 goroutines burn CPU in
// main.burn on 2 Ps, so Go's sysmon preempts them (SIGURG) every 10 ms, and the goroutines resume
// through runtime.asyncPreempt. It imports "C" so that it is linked dynamically and the agent can
// be preloaded into it (a static Go binary loads nothing).
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
)

var ticks uint64

//go:noinline
func tick(x uint64) { ticks += x & 1 }

// burn keeps a frame of its own (it calls tick): a walk by frame pointers from inside it is exact.
//
//go:noinline
func burn(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		if i&0xfffff == 0 {
			tick(x)
		}
	}
	return x
}

func main() {
	_ = C.int(0)
	runtime.GOMAXPROCS(2)
	var wg sync.WaitGroup
	var sink [8]uint64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sink[g] = burn(120000000)
		}(g)
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, "done", sink[0]&1)
}
