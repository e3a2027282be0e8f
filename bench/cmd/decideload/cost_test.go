package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A child that exits during a run (a backend whose connection closed) must
// keep its CPU in the tree's total: it moves to the parent's cutime/cstime.
func TestTreeTicksKeepsExitedChildren(t *testing.T) {
	self := os.Getpid()
	before := treeTicks(self)
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Fatalf("busy child: %v", err)
	}
	childCPU := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	childTicks := int64(childCPU / (time.Second / clockTicks))
	if childTicks < 5 {
		t.Fatalf("the busy child used %v of CPU: too little to measure", childCPU)
	}
	after := treeTicks(self)
	if got := after - before; got < childTicks-1 {
		t.Fatalf("tree CPU grew by %d ticks over a child that used %d and exited", got, childTicks)
	}
}
