// SPDX-License-Identifier: MIT
// tests/hosts/goframes.go - a Go ground-truth program for tests/cli-record-go-frames.sh: the main
// goroutine, locked to the main thread, runs four phases one after the other, each for a set
// amount of that thread's CPU time, measured by getrusage(RUSAGE_THREAD) around it:
//
//	main.phaseLeaves  a loop over four frameless leaves (no frame pointer pushed, sp not moved);
//	main.phaseDeep    a recursion 40 deep whose bottom loops over main.mid, a small function
//	                  with a frame (its stack check and prologue run at every call), and a leaf;
//	main.phaseCopy    copy() of 32 KiB: runtime.memmove, assembly without a frame;
//	main.phaseMap     map lookups by string: runtime.mapaccess1_faststr and the asm hash.
//
// It prints to stderr "tid N", "premain NS" (the thread's CPU when main.main starts), "phase NAME
// NS" for each phase and "total NS" (the thread's CPU after the phases), then sleeps 300 ms. The
// garbage collector is off so that no other thread runs much. It imports "C" so that it is linked dynamically and
// the agent can be preloaded into it (a static Go binary loads nothing).
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

const rusageThread = 1 // RUSAGE_THREAD

func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var sink uint64

//go:noinline
func leafAdd(x uint64) uint64 { return x + 0x9e3779b97f4a7c15 }

//go:noinline
func leafMul(x uint64) uint64 { return x * 6364136223846793005 }

//go:noinline
func leafRot(x uint64) uint64 { return x<<13 | x>>51 }

//go:noinline
func leafMix(x uint64) uint64 { return (x ^ x>>29) * 0xbf58476d1ce4e5b9 }

//go:noinline
func phaseLeaves(target int64) {
	x := uint64(1)
	for start := threadCPU(); threadCPU()-start < target; {
		for i := 0; i < 100000; i++ {
			x = leafMix(leafRot(leafMul(leafAdd(x))))
		}
	}
	sink += x
}

// mid has a frame of its own (it calls a leaf): its stack check and prologue run at every call.
//
//go:noinline
func mid(x uint64) uint64 {
	var buf [4]uint64
	buf[x&3] = leafMix(x)
	return buf[0] + buf[1] + buf[2] + buf[3] + x
}

//go:noinline
func deep(n int, x uint64) uint64 {
	if n == 0 {
		for i := 0; i < 100000; i++ {
			x = mid(x)
		}
		return x
	}
	return deep(n-1, x) + 1
}

//go:noinline
func phaseDeep(target int64) {
	x := uint64(1)
	for start := threadCPU(); threadCPU()-start < target; {
		x = deep(40, x)
	}
	sink += x
}

// On the heap: two 32 KiB arrays in phaseCopy's frame (and phaseMap's 8 KiB of keys) would put
// main.main's frame beyond the 4 KiB of stack a perf-ring sample copies (agent/internal.h,
// AG_PRING_STACK), and end such a sample's stack there.
var copyA, copyB = make([]byte, 32<<10), make([]byte, 32<<10)
var mapKeys = make([]string, 512)

//go:noinline
func phaseCopy(target int64) {
	a, b := copyA, copyB
	for start := threadCPU(); threadCPU()-start < target; {
		for i := 0; i < 1000; i++ {
			copy(a, b)
			a[i&1023]++
			copy(b, a)
		}
	}
	sink += uint64(a[0])
}

//go:noinline
func phaseMap(target int64) {
	m := make(map[string]int)
	keys := mapKeys
	for i := range keys {
		keys[i] = "key-of-some-length-" + strconv.Itoa(i)
		m[keys[i]] = i
	}
	n := 0
	for start := threadCPU(); threadCPU()-start < target; {
		for i := 0; i < 100000; i++ {
			n += m[keys[i&511]]
		}
	}
	sink += uint64(n)
}

func init() { runtime.LockOSThread() }

func main() {
	_ = C.int(0)
	debug.SetGCPercent(-1)
	fmt.Fprintf(os.Stderr, "tid %d\npremain %d\n", syscall.Gettid(), threadCPU())
	target := int64(600e6)
	if len(os.Args) > 1 {
		ms, err := strconv.Atoi(os.Args[1])
		if err != nil {
			panic(err)
		}
		target = int64(ms) * 1e6
	}
	phases := []struct {
		name string
		fn   func(int64)
	}{
		{"phaseLeaves", phaseLeaves},
		{"phaseDeep", phaseDeep},
		{"phaseCopy", phaseCopy},
		{"phaseMap", phaseMap},
	}
	for _, p := range phases {
		t0 := threadCPU()
		p.fn(target)
		fmt.Fprintf(os.Stderr, "phase %s %d\n", p.name, threadCPU()-t0)
	}
	fmt.Fprintf(os.Stderr, "total %d\nsink %d\n", threadCPU(), sink&1)
	// Go's exit is a bare exit_group: the agent's drain gets no last turn, and the samples of
	// the last tens of milliseconds would be lost with it. Idle time lets it drain them.
	time.Sleep(300 * time.Millisecond)
}
